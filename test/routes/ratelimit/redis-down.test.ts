import t from "tap";
import { outageScenarios } from "./outage.js";

t.test("Redis stops (connections drop, new ones are refused), then starts again empty", (t) =>
  outageScenarios(t, {
    name: "Redis stopped",
    breakRedis: (server) => server.stop(),
    restoreRedis: (server) => server.start(),
  }),
);
