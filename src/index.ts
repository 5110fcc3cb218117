// The package's main entry: a keygate server built in code (the process entry, `keygate/server`, starts one from the
// configuration file and the environment, as `node dist/server.js` does). The Fastify plugin is `keygate/fastify`.

export { type BuildOptions, buildApp } from "./app.js";
export { ConfigError, type LoadConfigOptions, loadConfig, validateConfig } from "./config/load.js";
export type { KeygateConfig } from "./config/schema.js";
