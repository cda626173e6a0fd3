// Runs verdaccio on 127.0.0.1, port 0, with the config file given as the only argument, and reports the
// address to the parent over IPC. Started by local-registry.ts (`node verdaccio-server.ts <config>`).

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runServer } from 'verdaccio';

const configPath = process.argv[2];
if (configPath === undefined || process.send === undefined) {
  throw new Error('usage: node verdaccio-server.ts <config.yaml>, as a child process with an IPC channel');
}
const server = (await runServer(configPath)) as Server;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.send?.({ url: `http://127.0.0.1:${port}/` });
});
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
// Never outlive the test or bench that started it.
process.on('disconnect', () => process.exit(0));
