/**
 * Who a TCP port counts against for `maxTcpPortsPerOwner`: the agent's token, or for an anonymous agent its
 * client address (issue #29). An anonymous agent picks its own agent key, a new one per connection if it
 * likes, so a limit counted by key would bound nothing; sessions are counted by address for the same reason
 * (agent-endpoint.ts). The owner (the key) still decides who may take a port back within its grace.
 * Owner keys are base64url hashes (session-name.ts `ownerKey`), so `addr:` never collides with one.
 */
export function tcpAccount(owner: string, address: string | undefined): string {
  return address === undefined ? owner : `addr:${address}`;
}
