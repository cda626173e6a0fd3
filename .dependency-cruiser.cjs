/**
 * Import circles are forbidden in every package's src (issue 31): a circle means two modules each need the
 * other to be read, so neither has one job, and the import order decides which one sees the other
 * half-loaded. `pnpm lint:circles` (part of `pnpm test`) runs this over every packages/<name>/src and
 * bench/src and prints each circle, and each import that goes up a package's folders (layerRules below).
 *
 * Type-only imports count (`tsPreCompilationDeps: true`): `import type` erases at build time, but a type
 * circle is the same tangle of concerns, and the next value import along it makes it a runtime one.
 */

/**
 * A package's folders, top to bottom (its README.md, "Source layout" or "Direction of imports"): a folder
 * imports only the folders below it, and the shared files at the top of src (errors, constants, ...) import
 * no folder. The entries (`entries`: index.ts, main.ts, ...) may import any. `upward` names the imports up
 * that a folder still makes, each said in its map (`{ agents: ['settings'] }`); every other one fails.
 */
function layerRules(pkg, layers, entries, upward = {}) {
  const src = `^${pkg}/src/`;
  const downward = layers.slice(1).map((layer, i) => {
    const above = layers.slice(0, i + 1).filter((folder) => !(upward[layer] ?? []).includes(folder));
    return {
      name: `${pkg.split('/').pop()}-${layer}-imports-down`,
      severity: 'error',
      comment: `${pkg}/src/${layer}/ may not import ${above.join(', ')}: they sit above it.`,
      from: { path: `${src}${layer}/` },
      to: { path: `${src}(${above.join('|')})/` },
    };
  });
  const shared = {
    name: `${pkg.split('/').pop()}-shared-imports-no-folder`,
    severity: 'error',
    comment: `The files at the top of ${pkg}/src besides ${entries.join(', ')} are below every folder.`,
    from: { path: `${src}[^/]+[.]ts$`, pathNot: `${src}(${entries.join('|')})[.]ts$` },
    to: { path: `${src}[^/]+/` },
  };
  const entryRule = {
    name: `${pkg.split('/').pop()}-folders-import-no-entry`,
    severity: 'error',
    comment: `${entries.join(', ')} assemble ${pkg}: no folder imports them (declare the type it needs instead).`,
    from: { path: `${src}[^/]+/` },
    to: { path: `${src}(${entries.join('|')})[.]ts$` },
  };
  return [...downward, shared, entryRule];
}

/** The CLI (packages/cli/README.md, "Source layout"). */
const cliRules = layerRules(
  'packages/cli',
  ['commands', 'config', 'terminal', 'session', 'forwarding'],
  ['main', 'cli-program', 'index'],
);
/**
 * The CLI's HTTP/2 backend path (packages/cli/src/forwarding/http2/README.md): chosen by forward-exchange.ts,
 * it uses what the exchanges share and never reaches back to the files that choose it.
 */
const cliHttp2Rule = {
  name: 'cli-forwarding-http2-imports-no-dispatch',
  severity: 'error',
  comment:
    'packages/cli/src/forwarding/http2/ is chosen by forward-exchange.ts: it may not import it or stream-dispatch.ts.',
  from: { path: '^packages/cli/src/forwarding/http2/' },
  to: { path: '^packages/cli/src/forwarding/(forward-exchange|stream-dispatch)[.]ts$' },
};
/** The protocol (packages/protocol/README.md). */
const protocolRules = layerRules('packages/protocol', ['transport', 'session', 'codec'], ['index']);
/**
 * The edge (packages/edge/README.md, "Direction of imports"). Still upward, each said in its folder's map:
 * `agents/agent-endpoint.ts` reads the resolved options (`settings/`); `answers/` reads the request id header
 * (`public/`) and `abortResponse` (`exchange/`), left while the HTTP/2 work reshapes those folders.
 */
const edgeRules = layerRules(
  'packages/edge',
  [
    'workers',
    'listeners',
    'operations',
    'settings',
    'cluster',
    'tcp',
    'public',
    'agents',
    'access',
    'exchange',
    'answers',
  ],
  ['main', 'index', 'build-edge', 'edge-server', 'edge-routes', 'edge-tcp'],
  { agents: ['settings'], answers: ['public', 'exchange'] },
);
/** The bench kit (bench/README.md, "Source layout"). */
const benchRules = layerRules(
  'bench',
  ['compare', 'runs', 'reports', 'verdict', 'scenarios', 'processes', 'measure', 'stacks', 'plan'],
  ['main'],
);
/** The inspector (packages/inspector/README.md, "How it is built"). */
const inspectorRules = layerRules(
  'packages/inspector',
  ['server', 'views', 'capture', 'entries'],
  ['index', 'inspector'],
);

module.exports = {
  forbidden: [
    ...cliRules,
    cliHttp2Rule,
    ...protocolRules,
    ...edgeRules,
    ...inspectorRules,
    ...benchRules,
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
