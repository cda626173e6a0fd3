# The test backend and the agent CLI for docker/compose.yaml's demo: the whole workspace, built. Not for
# production (the edge's image is docker/Dockerfile).
ARG NODE_IMAGE=docker.io/library/node:24-bookworm-slim
FROM ${NODE_IMAGE}
ARG PNPM_VERSION=10.34.9
ENV CI=true npm_config_update_notifier=false npm_config_fund=false
RUN npm install --global --prefix /usr/local "pnpm@${PNPM_VERSION}"
WORKDIR /src
COPY . .
RUN pnpm install --frozen-lockfile --ignore-scripts \
 && node node_modules/typescript/bin/tsc -b packages/cli packages/test-backend
USER 10001:10001
# Run the agent on the main thread: a container's PID 1 gets the signals itself.
ENV TUNNEL2_IN_PROCESS=1
