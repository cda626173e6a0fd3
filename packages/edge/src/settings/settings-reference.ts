import { edgeSettingSpecs, envOf, flagOf, settingKeys } from './edge-config.js';

/** A markdown table of every setting, for docs/self-hosting.md (a test keeps the docs equal to it). */
export function settingsReference(): string {
  const rows = settingKeys.map((key) => {
    const spec = edgeSettingSpecs[key];
    const def = spec.default === undefined ? 'unset' : JSON.stringify(spec.default);
    const flag = `${spec.short ? `-${spec.short}, ` : ''}--${flagOf(key)}`;
    return `| \`${key}\` | \`${flag}\` | \`${envOf(key)}\` | ${def} | ${spec.allowed} | ${spec.description.replaceAll('|', '\\|')} |`;
  });
  return [
    '| setting (file key) | flag | variable | default | allowed | meaning |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}
