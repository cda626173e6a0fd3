import { EdgeError, EdgeErrorCode } from '../errors.js';
import {
  type EdgeSettings,
  edgeSettingSpecs,
  envOf,
  flagOf,
  type SettingKey,
  settingKeys,
} from './edge-config.js';
import { type SettingSpec, ValueProblem } from './setting-parsers.js';

// Where each setting's value comes from: flag > variable > config file > default, each checked by its parser.

export type SettingSource = 'flag' | 'env' | 'file' | 'default';

export interface LoadedConfig {
  settings: EdgeSettings;
  sources: Record<SettingKey, SettingSource>;
}

export interface ConfigInputs {
  /** Values from flags, keyed by setting (already split by the flag parser). */
  flags: Partial<Record<SettingKey, unknown>>;
  env: NodeJS.ProcessEnv;
  /** Parsed JSON of the config file, and its path for errors. */
  file?: { path: string; content: unknown };
}

function invalidSetting(key: SettingKey, raw: unknown, where: string, allowed: string): EdgeError {
  const spec: SettingSpec<unknown> = edgeSettingSpecs[key];
  const shown = spec.secret
    ? '<redacted>'
    : typeof raw === 'string'
      ? (spec.redact?.(raw) ?? raw)
      : JSON.stringify(raw);
  return new EdgeError(
    EdgeErrorCode.INVALID_CONFIG,
    `invalid setting ${key}=${shown} (from ${where}): must be ${allowed}`,
  );
}

/** Applies precedence (flag > env > file > default) and validates every value; throws naming the setting. */
export function loadEdgeConfig(inputs: ConfigInputs): LoadedConfig {
  const fileValues = checkFile(inputs.file);
  const settings = {} as Record<SettingKey, unknown>;
  const sources = {} as Record<SettingKey, SettingSource>;
  for (const key of settingKeys) {
    const spec = edgeSettingSpecs[key] as SettingSpec<unknown>;
    const candidates: [SettingSource, unknown, string][] = [
      ['flag', inputs.flags[key], `--${flagOf(key)}`],
      ['env', inputs.env[envOf(key)], envOf(key)],
      ['file', fileValues[key], `${inputs.file?.path ?? 'config file'}: ${key}`],
    ];
    const chosen = candidates.find(([, raw]) => raw !== undefined);
    if (chosen === undefined) {
      settings[key] = spec.default;
      sources[key] = 'default';
      continue;
    }
    const [source, raw, where] = chosen;
    try {
      settings[key] = spec.parse(raw);
    } catch (err) {
      if (err instanceof ValueProblem) throw invalidSetting(key, raw, where, spec.allowed);
      throw err;
    }
    sources[key] = source;
  }
  return { settings: settings as unknown as EdgeSettings, sources };
}

function checkFile(file: ConfigInputs['file']): Partial<Record<SettingKey, unknown>> {
  if (file === undefined) return {};
  const { content, path } = file;
  if (typeof content !== 'object' || content === null || Array.isArray(content)) {
    throw new EdgeError(EdgeErrorCode.INVALID_CONFIG, `invalid config file ${path}: must be a JSON object`);
  }
  for (const key of Object.keys(content)) {
    if (!(key in edgeSettingSpecs)) {
      throw new EdgeError(
        EdgeErrorCode.INVALID_CONFIG,
        `unknown setting "${key}" in ${path}: known settings are ${settingKeys.join(', ')}`,
      );
    }
  }
  return content as Partial<Record<SettingKey, unknown>>;
}
