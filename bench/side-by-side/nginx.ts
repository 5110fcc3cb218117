import { execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { treeCpuMicros } from "./keygate.js";

/** Whether nginx is on the PATH (the gateway benchmark measures it when it is). */
export function nginxInstalled(): boolean {
  try {
    execFileSync("nginx", ["-v"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** A free loopback port: nginx needs one written in its configuration. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * nginx with one worker process as a plain reverse proxy to `upstream` (keep-alive connections upstream, no
 * logging, no buffering of answers), in a directory of its own; its CPU time is its process tree's.
 */
export async function startNginx(upstream: string) {
  const directory = await mkdtemp(join(tmpdir(), "keygate-bench-nginx-"));
  const port = await freePort();
  const target = new URL(upstream);
  const config = `worker_processes 1;
error_log ${directory}/error.log error;
pid ${directory}/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${directory}/body;
  proxy_temp_path ${directory}/proxy;
  upstream backend { server ${target.host}; keepalive 128; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`;
  await writeFile(join(directory, "nginx.conf"), config);
  const child = spawn("nginx", ["-p", directory, "-c", join(directory, "nginx.conf"), "-g", "daemon off;"], { stdio: "inherit" });
  const url = `http://127.0.0.1:${port}`;
  for (let attempt = 0; ; attempt++) {
    try {
      await fetch(`${url}/`);
      break;
    } catch (error) {
      if (attempt >= 100) throw new Error(`nginx did not start: ${(error as Error).message}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    served: { url },
    cpuMicros: () => treeCpuMicros(child.pid as number),
    close: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGQUIT");
      await exited;
      await rm(directory, { recursive: true, force: true });
    },
  };
}
