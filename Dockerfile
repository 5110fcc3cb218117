# syntax=docker/dockerfile:1

# Build stage: install everything, compile TypeScript, then drop the dev dependencies.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY dashboard ./dashboard
RUN npm run build && npm prune --omit=dev --ignore-scripts

# Runtime stage: only the compiled code and production dependencies, run as the unprivileged `node` user.
FROM node:20-bookworm-slim
# KEYGATE_WORKERS=auto: one worker per core the container may use when the stores are in Redis; one in memory.
ENV NODE_ENV=production PORT=8080 HOST=0.0.0.0 KEYGATE_WORKERS=auto
WORKDIR /app
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --chown=node:node package.json ./
COPY --chown=node:node config/keygate.example.yaml ./config/keygate.example.yaml
# The embedded analytics engine keeps its data here (analytics.path defaults to ./data/analytics).
RUN mkdir -p /app/data/analytics && chown -R node:node /app/data
VOLUME /app/data
USER node
EXPOSE 8080
# Plain HTTP, or HTTPS when server.tls is set (a TLS port drops a plain request): the certificate is not checked here,
# it names the service rather than 127.0.0.1.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "const at = { host: '127.0.0.1', port: process.env.PORT || 8080, path: '/v2/liveness', rejectUnauthorized: false }; const done = (r) => process.exit(r.statusCode === 200 ? 0 : 1); require('node:http').get(at, done).on('error', () => require('node:https').get(at, done).on('error', () => process.exit(1)))"]
CMD ["node", "--enable-source-maps", "dist/server.js"]
