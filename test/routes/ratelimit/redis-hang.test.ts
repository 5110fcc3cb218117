import t from "tap";
import { outageScenarios } from "./outage.js";

t.test("Redis hangs (connections stay open, nothing is answered), then goes on", (t) =>
  outageScenarios(t, {
    name: "Redis hung",
    breakRedis: (server) => server.hang(),
    restoreRedis: (server) => server.resume(),
  }),
);
