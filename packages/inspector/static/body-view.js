// Renders a captured body by what it is: JSON, form fields, multipart parts, XML, text, an image or hex.

import { fromBase64 } from './api.js';
import { el, formatBytes, pairTable } from './dom.js';
import { jsonErrorOffset } from './json-error-position.js';

const MAX_TEXT = 512 * 1024;
const MAX_HEX = 16 * 1024;
const utf8 = new TextDecoder('utf-8', { fatal: true });
const latin1 = new TextDecoder('latin1');

/** The body's text when it is valid UTF-8 without control bytes (other than whitespace), else undefined. */
export function asText(bytes) {
  let text;
  try {
    text = utf8.decode(bytes);
  } catch {
    return undefined;
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control bytes are exactly what marks binary
  return /[\x00-\x08\x0e-\x1f\x7f]/.test(text) ? undefined : text;
}

/** The bytes to show: decoded when the API could decode them (gzip/br/deflate). */
export function bodyBytes(body) {
  return fromBase64(body.decodedBase64 ?? body.base64);
}

function mediaType(body) {
  return (body.contentType ?? '').split(';')[0].trim().toLowerCase();
}

function param(contentType, name) {
  const match = new RegExp(`;\\s*${name}=(?:"([^"]*)"|([^;\\s]*))`, 'i').exec(contentType ?? '');
  return match === null ? undefined : (match[1] ?? match[2]);
}

/** JSON pretty-printed with token colours; undefined plus the error when it does not parse. */
function jsonView(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { error: err };
  }
  const pretty = JSON.stringify(value, null, 2);
  const pre = el('pre', { class: 'code json' });
  const token = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
  let last = 0;
  for (const m of pretty.matchAll(token)) {
    pre.append(pretty.slice(last, m.index));
    const kind =
      m[1] !== undefined ? (m[2] !== undefined ? 'key' : 'str') : m[3] !== undefined ? 'lit' : 'num';
    pre.append(el('span', { class: `j-${kind}` }, m[1] ?? m[0]));
    if (m[2] !== undefined) pre.append(m[2]);
    last = m.index + m[0].length;
  }
  pre.append(pretty.slice(last));
  return { node: pre, pretty };
}

/** Where the JSON text stops being JSON, as line and column (1-based). */
function jsonErrorAt(text) {
  const offset = jsonErrorOffset(text);
  if (offset === undefined) return undefined;
  const lines = text.slice(0, offset).split('\n');
  return { line: lines.length, column: lines.at(-1).length + 1 };
}

function badJsonView(text, err) {
  const at = jsonErrorAt(text);
  const where = at === undefined ? '' : ` at line ${at.line}, column ${at.column}`;
  const pre = el('pre', { class: 'code' });
  if (at === undefined) pre.append(text);
  else {
    const lines = text.split('\n');
    pre.append(lines.slice(0, at.line).join('\n'));
    pre.append(el('span', { class: 'caret' }, `\n${' '.repeat(Math.max(0, at.column - 1))}^ here`));
    if (lines.length > at.line) pre.append(`\n${lines.slice(at.line).join('\n')}`);
  }
  return [el('p', { class: 'error-text json-error' }, `Not valid JSON${where}: ${err.message}`), pre];
}

/** XML indented one element per line (a display aid: text and attributes are kept as they are). */
export function prettyXml(text) {
  let depth = 0;
  const out = [];
  for (const raw of text.replace(/>\s*</g, '>\n<').split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (/^<\//.test(line)) depth = Math.max(0, depth - 1);
    out.push('  '.repeat(depth) + line);
    if (/^<[^!?/][^>]*[^/]>$/.test(line) && !/<\/[^>]+>$/.test(line)) depth++;
    else if (/^<[^!?/]>$/.test(line)) depth++;
  }
  return out.join('\n');
}

function indexOf(bytes, needle, from) {
  outer: for (let i = from; i <= bytes.length - needle.length; i++) {
    for (let j = 0; j < needle.length; j++) if (bytes[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/** The parts of a multipart body: each part's head lines and its bytes. */
export function multipartParts(bytes, boundary) {
  const delimiter = new TextEncoder().encode(`--${boundary}`);
  const parts = [];
  let at = indexOf(bytes, delimiter, 0);
  while (at >= 0 && parts.length < 200) {
    const start = at + delimiter.length;
    if (bytes[start] === 45 && bytes[start + 1] === 45) break; // "--": the closing delimiter
    const next = indexOf(bytes, delimiter, start);
    const part = bytes.subarray(start, next < 0 ? bytes.length : next);
    const headEnd = indexOf(part, new Uint8Array([13, 10, 13, 10]), 0);
    const head = latin1.decode(part.subarray(0, Math.max(0, headEnd))).trim();
    let content = part.subarray(headEnd < 0 ? 0 : headEnd + 4);
    if (content.at(-2) === 13 && content.at(-1) === 10) content = content.subarray(0, content.length - 2);
    parts.push({ head: head.split('\r\n').filter((line) => line !== ''), content });
    at = next;
  }
  return parts;
}

function multipartView(bytes, boundary) {
  const parts = multipartParts(bytes, boundary);
  if (parts.length === 0) return undefined;
  return el(
    'div',
    { class: 'parts' },
    parts.map((part, i) => {
      const headers = part.head.map((line) => {
        const colon = line.indexOf(':');
        return [line.slice(0, colon).trim(), line.slice(colon + 1).trim()];
      });
      const text = asText(part.content);
      return el(
        'div',
        { class: 'part' },
        el('div', { class: 'part-title' }, `part ${i + 1} · ${formatBytes(part.content.length)}`),
        pairTable(headers),
        text === undefined ? hexView(part.content) : el('pre', { class: 'code' }, text),
      );
    }),
  );
}

/** A hex dump: offset, 16 bytes, their printable ASCII. */
export function hexView(bytes) {
  const lines = [];
  const shown = Math.min(bytes.length, MAX_HEX);
  for (let off = 0; off < shown; off += 16) {
    const row = bytes.subarray(off, Math.min(off + 16, shown));
    const hex = [...row].map((b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = [...row].map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${off.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (bytes.length > shown) lines.push(`… ${formatBytes(bytes.length - shown)} more`);
  return el('pre', { class: 'code hex' }, lines.join('\n'));
}

/** The body as display text (for the diff of a replay against its original). */
export function bodyText(body) {
  const bytes = bodyBytes(body);
  const text = asText(bytes);
  if (text === undefined) return `(${formatBytes(bytes.length)} of binary data)`;
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function contentView(body, bytes) {
  const type = mediaType(body);
  if (type.startsWith('image/') && !body.truncated) {
    const url = URL.createObjectURL(new Blob([bytes], { type }));
    return [el('img', { class: 'inline-image', src: url, alt: `${type} body` })];
  }
  if (type === 'multipart/form-data' || type.startsWith('multipart/')) {
    const boundary = param(body.contentType, 'boundary');
    const view = boundary === undefined ? undefined : multipartView(bytes, boundary);
    if (view !== undefined) return [view];
  }
  const text = asText(bytes);
  if (text === undefined) return [hexView(bytes)];
  const shown = text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) : text;
  const looksJson = /^\s*[[{]/.test(text);
  if (type === 'application/json' || type.endsWith('+json') || looksJson) {
    const json = jsonView(shown);
    if (json.node !== undefined) return [json.node];
    if (!body.truncated) return badJsonView(shown, json.error);
  }
  if (type === 'application/x-www-form-urlencoded') {
    return [pairTable([...new URLSearchParams(text)]), el('pre', { class: 'code raw' }, shown)];
  }
  if (type.endsWith('/xml') || type.endsWith('+xml') || /^\s*<\?xml/.test(text)) {
    return [el('pre', { class: 'code xml' }, prettyXml(shown))];
  }
  return [el('pre', { class: 'code' }, shown)];
}

/** The whole body section: notes (size, truncation, decoding) and the content. */
export function bodyView(body) {
  if (body.size === 0) return el('p', { class: 'muted' }, 'no body');
  const bytes = bodyBytes(body);
  const notes = [formatBytes(body.size)];
  if (body.contentType !== null) notes.push(body.contentType);
  if (body.decodedBase64 !== undefined)
    notes.push(`decoded from ${body.encoding} (${formatBytes(bytes.length)})`);
  else if (body.encoding !== null) notes.push(`${body.encoding}-encoded, shown as received`);
  const truncated = body.truncated
    ? el('p', { class: 'warn-text' }, `truncated at ${body.captured} bytes of ${body.size}`)
    : undefined;
  return el(
    'div',
    { class: 'body' },
    el('p', { class: 'muted' }, notes.join(' · ')),
    truncated,
    contentView(body, bytes),
  );
}
