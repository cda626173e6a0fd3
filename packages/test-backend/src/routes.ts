import { fixtureRoutes } from './fixture-routes.js';
import { loadtestRoutes } from './loadtest-routes.js';
import type { Route } from './router.js';
import { JSON_TYPE, sendBuffer } from './send-response.js';

export interface EndpointInfo {
  methods: readonly string[] | 'ANY';
  path: string;
  description: string;
}

let infoBody: Buffer | undefined;

const infoRoute: Route = {
  methods: ['GET'],
  path: '/loadtest/info',
  description: 'this list of endpoints',
  handle: ({ res }) => {
    infoBody ??= Buffer.from(JSON.stringify({ endpoints }, null, 2));
    sendBuffer(res, 200, JSON_TYPE, infoBody);
  },
};

/** Every route the backend serves; /loadtest/info is generated from this same table so it cannot drift. */
export const routes: readonly Route[] = [...loadtestRoutes, infoRoute, ...fixtureRoutes];

/** The endpoints as listed by GET /loadtest/info. */
export const endpoints: readonly EndpointInfo[] = routes.map(({ methods, path, description }) => ({
  methods,
  path,
  description,
}));
