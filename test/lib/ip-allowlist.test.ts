import t from "tap";
import { IpAllowlist, ipEntryProblem } from "../../src/lib/ip-allowlist.js";

t.test("entries are IPv4 and IPv6 addresses and CIDR ranges; anything else is named", async (t) => {
  for (const entry of ["10.0.0.1", "10.0.0.0/8", "0.0.0.0/0", "::1", "2001:db8::/32", "::/0", "::ffff:10.0.0.1"]) {
    t.equal(ipEntryProblem(entry), undefined, entry);
  }
  t.match(ipEntryProblem("10.0.0.0/33"), /prefix length outside 0-32/);
  t.match(ipEntryProblem("2001:db8::/129"), /prefix length outside 0-128/);
  t.match(ipEntryProblem("10.0.0.0/"), /prefix length/);
  t.match(ipEntryProblem("10.0.0.0/8a"), /prefix length/);
  for (const entry of ["", "localhost", "300.1.1.1", "10.0.0.0/8/8", "10.0.0", " 10.0.0.1"]) {
    t.match(ipEntryProblem(entry), /is not an IP address or a CIDR range/, `'${entry}'`);
  }
  t.throws(() => new IpAllowlist(["10.0.0.0/8", "nonsense"]), /'nonsense' is not an IP address/);
});

t.test("an address is allowed when an entry covers it, in its own family", async (t) => {
  const list = new IpAllowlist(["10.0.0.0/8", "192.168.1.7", "2001:db8::/32", "::1"]);
  for (const address of ["10.0.0.1", "10.255.255.255", "192.168.1.7", "2001:db8::5", "2001:db8:ffff::1", "::1", "::ffff:10.1.2.3"]) {
    t.ok(list.allows(address), `${address} is in`);
  }
  for (const address of ["11.0.0.1", "192.168.1.8", "2001:db9::1", "::2", "::ffff:11.1.2.3", "unknown", "", undefined]) {
    t.notOk(list.allows(address), `${address} is out`);
  }
  t.ok(new IpAllowlist(["0.0.0.0/0"]).allows("203.0.113.9"), "0.0.0.0/0 lets every IPv4 address in");
  t.notOk(new IpAllowlist(["0.0.0.0/0"]).allows("2001:db8::1"), "but no IPv6 one");
});
