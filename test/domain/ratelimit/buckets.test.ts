import t from "tap";
import { identityLimitBucket, keyLimitBucket, namespaceBucket } from "../../../src/domain/ratelimit/buckets.js";

// Counters are shared by every instance, of every version running at once during an upgrade: a bucket's name is a
// contract, and changing one would restart every count it names.
t.test("the names of rate limit counters are fixed", async (t) => {
  t.equal(keyLimitBucket("key_123", "requests"), "key:key_123:requests");
  t.equal(identityLimitBucket("id_456", "requests"), "identity:id_456:requests");
  t.equal(namespaceBucket("rlns_789", "user:42"), "ns:rlns_789:user:42");
});
