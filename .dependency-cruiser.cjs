/**
 * Import circles are forbidden in every package's src (issue 31): a circle means two modules each need the
 * other to be read, so neither has one job, and the import order decides which one sees the other
 * half-loaded. `pnpm lint:circles` (part of `pnpm test`) runs this over every packages/<name>/src and
 * bench/src and prints each circle, and each import that goes up the CLI's folders.
 *
 * Type-only imports count (`tsPreCompilationDeps: true`): `import type` erases at build time, but a type
 * circle is the same tangle of concerns, and the next value import along it makes it a runtime one.
 */

/**
 * The CLI's folders, top to bottom (packages/cli/README.md, "Source layout"): a folder imports only the
 * folders below it, and the shared files at the top of src (errors, version, ...) import no folder. main.ts
 * and index.ts, the two entries, may import any.
 */
const cliLayers = ['commands', 'config', 'terminal', 'session', 'forwarding'];
const cliLayerRules = cliLayers.slice(1).map((layer, i) => ({
  name: `cli-${layer}-imports-down`,
  severity: 'error',
  comment: `packages/cli/src/${layer}/ may not import ${cliLayers.slice(0, i + 1).join(', ')}: they sit above it.`,
  from: { path: `^packages/cli/src/${layer}/` },
  to: { path: `^packages/cli/src/(${cliLayers.slice(0, i + 1).join('|')})/` },
}));

module.exports = {
  forbidden: [
    ...cliLayerRules,
    {
      name: 'cli-shared-imports-no-folder',
      severity: 'error',
      comment:
        'The files at the top of packages/cli/src besides main.ts and index.ts are below every folder.',
      from: { path: '^packages/cli/src/[^/]+[.]ts$', pathNot: '^packages/cli/src/(main|index)[.]ts$' },
      to: { path: '^packages/cli/src/[^/]+/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'This import closes a circle. Move the shared type or function to the module it belongs in ' +
        '(usually a lower one both can import), rather than importing back up.',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.base.json' },
    // Packages import each other through their built dist (workspace links); project references already
    // make circles between packages impossible, so only the files under src are read.
    doNotFollow: { path: ['node_modules', '(^|/)dist/'] },
    exclude: { path: ['(^|/)dist/', '(^|/)node_modules/'] },
  },
};
