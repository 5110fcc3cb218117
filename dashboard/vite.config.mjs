// Builds the dashboard (Preact) into static files keygate serves under dashboard.path. Asset URLs are relative, so
// the same build works under any path. Usage: vite build --config dashboard/vite.config.mjs --outDir <dir>
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "./",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: { emptyOutDir: true, sourcemap: false, modulePreload: { polyfill: false }, reportCompressedSize: false },
});
