import t from "tap";
import { dashboardFlows } from "./dashboard-flows.js";

t.test("the dashboard in Chromium on Redis stores", (t) => dashboardFlows(t, "redis"));
