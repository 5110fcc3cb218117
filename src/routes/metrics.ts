import type { FastifyInstance } from "fastify";

/**
 * `GET /metrics`: counters in the Prometheus text format, without authentication (keep it on an internal
 * network). Today it carries the analytics event pipeline, so dropped verification events are visible.
 */
export async function metricsRoute(app: FastifyInstance): Promise<void> {
  app.get("/metrics", async (_request, reply) => {
    const stats = app.analytics.stats();
    const lines = [
      "# HELP keygate_analytics_events_recorded_total Verification events handed to the analytics pipeline.",
      "# TYPE keygate_analytics_events_recorded_total counter",
      `keygate_analytics_events_recorded_total ${stats.recorded}`,
      "# HELP keygate_analytics_events_written_total Verification events written to the analytics engine.",
      "# TYPE keygate_analytics_events_written_total counter",
      `keygate_analytics_events_written_total ${stats.written}`,
      "# HELP keygate_analytics_events_dropped_total Verification events not written, by reason.",
      "# TYPE keygate_analytics_events_dropped_total counter",
      `keygate_analytics_events_dropped_total{reason="buffer_full"} ${stats.dropped.bufferFull}`,
      `keygate_analytics_events_dropped_total{reason="write_failed"} ${stats.dropped.writeFailed}`,
      `keygate_analytics_events_dropped_total{reason="after_close"} ${stats.dropped.afterClose}`,
      `keygate_analytics_events_dropped_total{reason="analytics_off"} ${stats.dropped.disabled}`,
      "# HELP keygate_analytics_events_buffered Verification events waiting in memory to be written.",
      "# TYPE keygate_analytics_events_buffered gauge",
      `keygate_analytics_events_buffered ${stats.buffered}`,
      "# HELP keygate_analytics_batches_written_total Batches of events written.",
      "# TYPE keygate_analytics_batches_written_total counter",
      `keygate_analytics_batches_written_total ${stats.batchesWritten}`,
      "# HELP keygate_analytics_write_failures_total Failed attempts to write a batch.",
      "# TYPE keygate_analytics_write_failures_total counter",
      `keygate_analytics_write_failures_total ${stats.failedWrites}`,
    ];
    return reply.type("text/plain; version=0.0.4; charset=utf-8").send(`${lines.join("\n")}\n`);
  });
}
