import { parseArgs } from 'node:util';
import { EdgeError, EdgeErrorCode } from '../errors.js';
import {
  edgeSettingSpecs,
  flagOf,
  isBooleanSetting,
  isListSetting,
  type SettingKey,
  settingKeys,
} from './edge-config.js';
import { type LoadedConfig, loadEdgeConfig } from './load-edge-config.js';
import { MAX_CONFIG_FILE_BYTES, readSettingsFile } from './settings-file.js';
import { usageProblem } from './usage-problem.js';

/** What the command line asks for besides settings. */
export interface EdgeCommand {
  help: boolean;
  printConfig: boolean;
  /** Print the listening event as one JSON line on stdout. */
  json: boolean;
  config: LoadedConfig;
  /** The config file read, if any. */
  configPath: string | undefined;
}

type ParseArgsOptions = NonNullable<Parameters<typeof parseArgs>[0]>['options'];

function argOptions(): NonNullable<ParseArgsOptions> {
  const options: NonNullable<ParseArgsOptions> = {
    config: { type: 'string', short: 'c' },
    'print-config': { type: 'boolean' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  };
  for (const key of settingKeys) {
    const spec = edgeSettingSpecs[key];
    options[flagOf(key)] = {
      type: isBooleanSetting(key) ? 'boolean' : 'string',
      ...(spec.short === undefined ? {} : { short: spec.short }),
      ...(isListSetting(key) ? { multiple: true } : {}),
    };
  }
  return options;
}

/**
 * Parses `tunnel2 server` / `tunnel2-edge` arguments, reads the config file (`--config` or TUNNEL2_CONFIG)
 * and resolves every setting with flag > env > file > default. Throws an EdgeError naming the problem.
 */
export async function parseEdgeCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<EdgeCommand> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv,
      options: argOptions(),
      strict: true,
      allowPositionals: false,
      allowNegative: true,
    });
  } catch (err) {
    // node:util's message is the fallback only: several lines, for a case the tokens do not show.
    const problem =
      usageProblem(argv, argOptions()) ??
      String((err as Error).message).split('\n')[0] ??
      'invalid arguments';
    throw new EdgeError(EdgeErrorCode.INVALID_OPTION, problem, { cause: err });
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  const flags: Partial<Record<SettingKey, unknown>> = {};
  for (const key of settingKeys) {
    const value = values[flagOf(key)];
    if (value !== undefined) flags[key] = value;
  }
  const configPath = typeof values.config === 'string' ? values.config : env.TUNNEL2_CONFIG || undefined;
  let file: { path: string; content: unknown } | undefined;
  if (configPath !== undefined) {
    let text: string;
    try {
      text = await readSettingsFile(configPath, MAX_CONFIG_FILE_BYTES);
    } catch (err) {
      throw new EdgeError(
        EdgeErrorCode.INVALID_CONFIG,
        `cannot read config file ${configPath}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    try {
      file = { path: configPath, content: JSON.parse(text) as unknown };
    } catch (err) {
      throw new EdgeError(
        EdgeErrorCode.INVALID_CONFIG,
        `config file ${configPath} is not valid JSON: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }
  return {
    help: values.help === true,
    printConfig: values['print-config'] === true,
    json: values.json === true,
    config: loadEdgeConfig({ flags, env, ...(file === undefined ? {} : { file }) }),
    configPath,
  };
}
