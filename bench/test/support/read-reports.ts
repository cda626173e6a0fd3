import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect } from 'vitest';
import type { BenchReport } from '../../src/plan/report-schema.js';

const schema = JSON.parse(
  readFileSync(new URL('../../report.schema.json', import.meta.url), 'utf8'),
) as object;
const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats.default(ajv);
const validate = ajv.compile(schema);

/** The three reports a staged run wrote to `out`, report.json checked against report.schema.json first. */
export function readReports(out: string): { json: BenchReport; md: string; html: string } {
  const json = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as BenchReport;
  expect(validate(json), JSON.stringify(validate.errors, null, 2)).toBe(true);
  return {
    json,
    md: readFileSync(join(out, 'report.md'), 'utf8'),
    html: readFileSync(join(out, 'report.html'), 'utf8'),
  };
}
