// Builds the edge's application folder for its container image (docker/Dockerfile) from the workspace build:
//
//   node scripts/pack-edge.ts <outdir>        (after `tsc -b packages/edge`)
//
// esbuild bundles the edge with everything it imports, as scripts/pack-cli.ts bundles the published CLI, so
// the image holds no node_modules and the edge starts on fewer, larger modules: idle RSS 78–79 MB from the
// compiled packages, 69 MB bundled (bench/README.md, optimization log). Code splitting leaves what only some
// edges load (the Redis registry, undici for cluster hops) in chunks loaded on first use. <outdir> gets
// bin/tunnel2-edge.js, dist/, package.json (the edge reads its version from it), LICENSE and
// THIRD-PARTY-NOTICES.md.
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

// Plain Node runs this file, so pack-cli is imported by its .ts path, typed here (as scripts/pack-bench.ts does).
type PackCliModule = typeof import('./pack-cli.js');
type PackageJson = import('./pack-cli.js').PackageJson;
const { PROGRAM_BUNDLE_OPTIONS, cliDir, readJson, repoRoot, writeNotices } = (await import(
  new URL('./pack-cli.ts', import.meta.url).href
)) as PackCliModule;

const edgeDir = join(repoRoot, 'packages', 'edge');

/** Writes the edge's bundled application folder into `outDir` (emptied first); returns the bundled packages. */
export async function packEdge(outDir: string): Promise<string[]> {
  await rm(outDir, { recursive: true, force: true });
  await mkdir(join(outDir, 'bin'), { recursive: true });
  const { metafile } = await build({
    absWorkingDir: repoRoot,
    entryPoints: { main: join(edgeDir, 'dist', 'main.js') },
    outdir: join(outDir, 'dist'),
    ...PROGRAM_BUNDLE_OPTIONS,
  });
  if (metafile === undefined) throw new Error('esbuild wrote no metafile');
  const bundled = await writeNotices(metafile, outDir);
  const source = await readJson<PackageJson & { type?: string }>(join(edgeDir, 'package.json'));
  const manifest = {
    name: source.name,
    version: source.version,
    description: source.description,
    license: source.license,
    type: 'module',
    engines: source.engines,
    bin: { 'tunnel2-edge': './bin/tunnel2-edge.js' },
  };
  await writeFile(join(outDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await copyFile(join(edgeDir, 'bin', 'tunnel2-edge.js'), join(outDir, 'bin', 'tunnel2-edge.js'));
  await copyFile(join(edgeDir, 'bin', 'young-generation.js'), join(outDir, 'bin', 'young-generation.js'));
  await copyFile(join(edgeDir, 'bin', 'malloc-arenas.js'), join(outDir, 'bin', 'malloc-arenas.js'));
  await copyFile(join(cliDir, 'LICENSE'), join(outDir, 'LICENSE'));
  return bundled;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const outArg = process.argv[2];
  if (outArg === undefined) {
    process.stderr.write('usage: node scripts/pack-edge.ts <outdir>\n');
    process.exit(2);
  }
  const bundled = await packEdge(resolve(outArg));
  process.stdout.write(
    `edge bundled into ${outArg} with ${bundled.length} packages (THIRD-PARTY-NOTICES.md)\n`,
  );
}
