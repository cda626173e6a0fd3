/** The oldest supported Node.js version as [major, minor]; keep in step with `engines.node`. */
export declare const MINIMUM_NODE: readonly [number, number];
/**
 * One line naming the required version when `version` ("22.3.0" or "v22.3.0") is older than the supported
 * range or not a version at all; `undefined` when it is supported.
 */
export declare function checkNodeVersion(version: string): string | undefined;
