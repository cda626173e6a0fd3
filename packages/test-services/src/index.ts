export { type ClusterNodeArgsOptions, clusterNodeArgs } from './cluster-node-args.js';
export { ServiceError, ServiceErrorCode } from './errors.js';
export { freePort } from './free-port.js';
export { type Haproxy, type LbChecks, type LbNode, type LbOptions, startHaproxy } from './haproxy.js';
export { accepts, findCommand } from './native-process.js';
export { type RedisCluster, startRedisCluster } from './redis-cluster.js';
export { type RedisServer, type RedisServerOptions, startRedisServer } from './redis-server.js';
export { type IssuedCertificate, makeTestCa, type TestCa } from './test-certificates.js';
