import type { FastifyServerOptions } from 'fastify';

/** A route of the edge's own Fastify app was given a schema, which the app has no compiler for (a bug). */
export class RouteSchemaError extends Error {
  readonly code = 'TUNNEL2_ERR_ROUTE_SCHEMA_UNSUPPORTED';
  constructor(what: string) {
    super(
      `the edge's Fastify app compiles no route schemas (${what}): its routes read their few inputs ` +
        'themselves, and tunnelled bodies never pass through Fastify',
    );
    this.name = 'RouteSchemaError';
  }
}

function refuse(what: string): never {
  throw new RouteSchemaError(what);
}

/**
 * Fastify's schema controller for the edge's app. No edge route has a schema, yet Fastify loads its default
 * compilers (ajv with its formats, fast-json-stringify's) as the app is built: 3 MB of the idle edge's 18 MB
 * live heap, and 2-4 MiB of its RSS (bench/README.md, issue #34). These builders stand in for them; a route
 * given a schema fails as the app becomes ready, naming why.
 */
export const NO_ROUTE_SCHEMAS: NonNullable<FastifyServerOptions['schemaController']> = {
  compilersFactory: {
    buildValidator: () => refuse('validation'),
    buildSerializer: () => refuse('response serialization'),
  },
};
