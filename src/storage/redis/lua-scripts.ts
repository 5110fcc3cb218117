import { readFileSync } from "node:fs";

/**
 * The Lua source of the named scripts in `lua/` (shipped beside the compiled module; the build copies them),
 * joined in order: a script that uses shared functions names their file first.
 */
export function luaScript(...names: string[]): string {
  return names.map((name) => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), "utf8")).join("\n");
}
