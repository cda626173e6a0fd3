/**
 * Whom an agent's session and TCP ports count against: the agent's token, or for an anonymous agent its
 * client address (issue #29). An anonymous agent picks its own agent key, a new one per connection if it
 * likes, so anything counted by key would bound nothing: its sessions on this edge
 * (`maxSessionsPerOwner`, agent-endpoint.ts), its TCP ports (`maxTcpPortsPerOwner`, on one node and across
 * a cluster) and its share of a node link (cluster/link/link-shares.ts, from the account the registry records)
 * are counted by address. The owner (the key) still decides who may take a name or port back within its
 * grace. Owner keys are base64url hashes (session-name.ts `ownerKey`), so `addr:` never collides with one.
 */
export function agentAccount(owner: string, address: string | undefined): string {
  return address === undefined ? owner : `addr:${address}`;
}
