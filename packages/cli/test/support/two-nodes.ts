import { buildEdge, type Edge, type EdgeOptions } from '@tunnel2/edge';
import { silent } from './stack.js';

export const CLUSTER_SECRET = 'a-cluster-secret-of-at-least-32-characters';

type NodeOptions = Omit<EdgeOptions, 'cluster'> & {
  cluster?: Omit<NonNullable<EdgeOptions['cluster']>, 'secret'>;
};

/**
 * Node A and node B on A's registry (the memory one: both in this process), both listening, each with
 * its own options on top of the cluster secret. Clients ask A at `portA`; agents connect to B.
 */
export async function twoNodes(
  options: { a?: NodeOptions; b?: NodeOptions } = {},
): Promise<{ a: Edge; b: Edge; portA: number }> {
  const node = (nodeId: string, own: NodeOptions | undefined, shared: Partial<EdgeOptions>): Edge =>
    buildEdge({
      port: 0,
      logger: silent,
      nodeId,
      ...shared,
      ...own,
      cluster: { ...own?.cluster, secret: CLUSTER_SECRET },
    });
  const a = node('node-a', options.a, {});
  const b = node('node-b', options.b, { registry: a.options.registry });
  const portA = (await a.listen()).port;
  await b.listen();
  return { a, b, portA };
}
