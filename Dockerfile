# syntax=docker/dockerfile:1

# keygate's container image, two targets:
#   docker build -t keygate .                                   the slim image (default): analytics to a ClickHouse
#                                                               server, or off; no embedded engine
#   docker build --target embedded -t keygate:embedded .        with the embedded analytics engine (chDB): one
#                                                               container whose analytics data lives on its volume
# Node 24: the LTS line with the longest support among those keygate is tested on (supported to April 2028).
# docs/container.md: sizes, running as a sidecar, probes, the read-only root filesystem.
ARG NODE_MAJOR=24

# Build: every dependency, then the compiled server and the dashboard's and portal's pages.
FROM node:${NODE_MAJOR}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY dashboard ./dashboard
COPY portal ./portal
COPY ui ./ui
RUN npm run build

# Production dependencies, with chDB (an optional dependency, about 540 MB) and without it.
FROM build AS dependencies-embedded
RUN npm prune --omit=dev --ignore-scripts --no-audit --no-fund
FROM dependencies-embedded AS dependencies-slim
RUN npm prune --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund

# What both targets share: tini as PID 1, the compiled code (owned by root: the process cannot change it), a data
# directory for the volume, the unprivileged `node` user by number (so Kubernetes' runAsNonRoot can check it).
FROM node:${NODE_MAJOR}-bookworm-slim AS runtime
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
# KEYGATE_WORKERS=auto: one worker per core the container may use when the stores are in Redis; one in memory.
ENV NODE_ENV=production PORT=8080 HOST=0.0.0.0 KEYGATE_WORKERS=auto
WORKDIR /app
COPY package.json ./
COPY config/keygate.example.yaml ./config/keygate.example.yaml
COPY --from=build /app/dist ./dist
# The only directory keygate writes besides /tmp: the embedded engine's data (analytics.path defaults to
# ./data/analytics) and the bootstrap root key when none is configured.
RUN mkdir -p /app/data/analytics && chown -R 1000:1000 /app/data
VOLUME /app/data
USER 1000:1000
EXPOSE 8080
# Plain HTTP, or HTTPS when server.tls is set (a TLS port drops a plain request): the certificate is not checked here,
# it names the service rather than 127.0.0.1. Kept by Docker-format builds only (`podman build --format docker`);
# Kubernetes uses its own probes (deploy/kubernetes/).
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "const at = { host: '127.0.0.1', port: process.env.PORT || 8080, path: '/v2/liveness', rejectUnauthorized: false }; const done = (r) => process.exit(r.statusCode === 200 ? 0 : 1); require('node:http').get(at, done).on('error', () => require('node:https').get(at, done).on('error', () => process.exit(1)))"]
# tini forwards SIGTERM and SIGINT to keygate (which then closes gracefully) and reaps orphaned processes; it also
# ends keygate on a signal that arrives before keygate has installed its handlers, which Node as PID 1 would ignore.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "--enable-source-maps", "dist/server.js"]

# With the embedded engine: analytics.engine defaults to embedded, its data in /app/data/analytics.
FROM runtime AS embedded
COPY --from=dependencies-embedded /app/node_modules ./node_modules

# The default target: no embedded engine. Analytics is off unless KEYGATE_ANALYTICS_ENGINE=clickhouse with
# KEYGATE_CLICKHOUSE_URL names a ClickHouse server (the environment overrides a mounted file's analytics.engine).
FROM runtime AS slim
COPY --from=dependencies-slim /app/node_modules ./node_modules
ENV KEYGATE_ANALYTICS_ENGINE=off
