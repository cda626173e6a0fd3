// One file out of a zip archive (a GitHub Actions artifact), with node:zlib only: the action has no
// dependencies. Reads the central directory (the archive's own index, at its end) rather than scanning
// local headers, whose sizes are zero when the archive was written as a stream.

import { inflateRawSync } from 'node:zlib';

const END_OF_CENTRAL_DIRECTORY = 0x06054b50;
const CENTRAL_FILE_HEADER = 0x02014b50;
const LOCAL_FILE_HEADER = 0x04034b50;
/** An artifact's report.json is a few hundred KiB; anything past this is not one. */
const MAX_ENTRY_BYTES = 64 * 1024 * 1024;

/** The bytes of the entry named `name` (at any depth), or null when the archive has none. */
export function readZipEntry(zip, name) {
  const end = findEndOfCentralDirectory(zip);
  const count = zip.readUInt16LE(end + 10);
  let at = zip.readUInt32LE(end + 16);
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(at) !== CENTRAL_FILE_HEADER) throw new Error('zip: broken central directory');
    const method = zip.readUInt16LE(at + 10);
    const compressedSize = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const localAt = zip.readUInt32LE(at + 42);
    const entryName = zip.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    at += 46 + nameLength + extraLength + commentLength;
    if (entryName !== name && !entryName.endsWith(`/${name}`)) continue;
    if (size > MAX_ENTRY_BYTES) throw new Error(`zip: ${entryName} is ${size} bytes, more than a report`);
    if (zip.readUInt32LE(localAt) !== LOCAL_FILE_HEADER) throw new Error('zip: broken local header');
    const dataAt = localAt + 30 + zip.readUInt16LE(localAt + 26) + zip.readUInt16LE(localAt + 28);
    const data = zip.subarray(dataAt, dataAt + compressedSize);
    if (method === 0) return Buffer.from(data);
    if (method === 8) return inflateRawSync(data, { maxOutputLength: MAX_ENTRY_BYTES });
    throw new Error(`zip: ${entryName} uses compression method ${method}`);
  }
  return null;
}

function findEndOfCentralDirectory(zip) {
  // The record is 22 bytes plus a comment of at most 65,535.
  for (let at = zip.length - 22; at >= Math.max(0, zip.length - 22 - 65535); at--) {
    if (zip.readUInt32LE(at) === END_OF_CENTRAL_DIRECTORY) return at;
  }
  throw new Error('zip: not a zip archive');
}
