import t from "tap";
import { dashboardFlows } from "./dashboard-flows.js";

// The flows drive a real browser through every page: more than the default two minutes on a busy machine.
t.setTimeout(300_000);

t.test("the dashboard in Chromium on memory stores", (t) => dashboardFlows(t, "memory"));
