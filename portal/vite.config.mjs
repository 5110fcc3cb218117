// Builds the customer portal's pages (Preact) into static files keygate serves under /portal/_ui/; the page itself
// is answered at /portal/<slug>. Usage: vite build --config portal/vite.config.mjs --outDir <dir>
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/portal/_ui/",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: { emptyOutDir: true, sourcemap: false, modulePreload: { polyfill: false }, reportCompressedSize: false },
});
