#include "server/metrics.h"

#include <cstdio>
#include <functional>

#include "wharf/version.h"

namespace wharf::server {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", v);  // 0.0005, not 0.00050000000000000001
  return buf;
}

// A label value, escaped as the text format wants (queue names never need it; be safe).
std::string Label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class Writer {
 public:
  void Header(const char* name, const char* type, const char* help) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Sample(const std::string& name, const std::string& labels, double value) {
    out_ += name;
    if (!labels.empty()) out_ += "{" + labels + "}";
    out_ += " " + Number(value) + "\n";
  }
  void Gauge(const char* name, const char* help, double value) {
    Header(name, "gauge", help);
    Sample(name, "", value);
  }
  // One series per queue.
  void PerQueue(const broker::BrokerMetrics& m, const char* name, const char* type,
                const char* help, const std::function<bool(const broker::QueueMetrics&)>& has,
                const std::function<double(const broker::QueueMetrics&)>& value) {
    Header(name, type, help);
    for (const auto& q : m.queues) {
      if (has(q)) {
        const std::string vhost = q.info.vhost.empty() ? std::string("/") : q.info.vhost;
        Sample(name, "vhost=\"" + Label(vhost) + "\",queue=\"" + Label(q.info.name) + "\"",
               value(q));
      }
    }
  }
  // A histogram of milliseconds, exported in seconds.
  void Histogram(const char* name, const char* help, const wharf::Histogram& h) {
    Header(name, "histogram", help);
    uint64_t cumulative = 0;
    const std::string bucket = std::string(name) + "_bucket";
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      cumulative += h.counts()[i];
      Sample(bucket, "le=\"" + Number(h.bounds()[i] / 1000) + "\"",
             static_cast<double>(cumulative));
    }
    Sample(bucket, "le=\"+Inf\"", static_cast<double>(h.count()));
    Sample(std::string(name) + "_sum", "", h.sum() / 1000);
    Sample(std::string(name) + "_count", "", static_cast<double>(h.count()));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string RenderMetrics(const broker::BrokerMetrics& m, const store::StoreCounters* store,
                          int64_t now_ms, const ProcessStats* process,
                          const FrameBudgetMetrics* frames) {
  using broker::QueueMetrics;
  auto all = [](const QueueMetrics&) { return true; };
  Writer w;
  w.Header("wharf_build_info", "gauge", "Always 1; the version label says which wharfd runs.");
  w.Sample("wharf_build_info", "version=\"" + Label(WHARF_VERSION) + "\"", 1);
  if (process) {
    w.Gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
            static_cast<double>(process->resident_bytes));
    w.Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
            static_cast<double>(process->virtual_bytes));
    w.Gauge("process_open_fds", "Number of open file descriptors.",
            static_cast<double>(process->open_fds));
    w.Gauge("process_max_fds", "Maximum number of open file descriptors.",
            static_cast<double>(process->max_fds));
    w.Gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
            process->start_time_seconds);
    w.Header("process_cpu_seconds_total", "counter",
             "Total user and system CPU time spent in seconds.");
    w.Sample("process_cpu_seconds_total", "", process->cpu_seconds);
  }
  w.Gauge("wharf_connections", "Connections logged in (both protocols).",
          static_cast<double>(m.connections));
  w.Gauge("wharf_amqp_connections", "AMQP 0-9-1 connections open (of wharf_connections).",
          static_cast<double>(m.amqp_connections));
  w.Gauge("wharf_amqp_channels", "Channels open on AMQP connections.",
          static_cast<double>(m.amqp_channels));
  w.Gauge("wharf_consumers", "Active consumers (push subscriptions) on all queues.",
          static_cast<double>(m.consumers));
  w.Gauge("wharf_queues", "Queues.", static_cast<double>(m.queues.size()));
  // Totals over all queues, beside the per-queue series (sum() without a query).
  uint64_t ready = 0, delayed = 0;
  for (const QueueMetrics& q : m.queues) {
    ready += q.info.ready;
    delayed += q.info.delayed;
  }
  w.Gauge("wharf_messages_ready", "Messages waiting to be delivered, all queues.",
          static_cast<double>(ready));
  w.Gauge("wharf_messages_delayed", "Messages waiting for their delivery time, all queues.",
          static_cast<double>(delayed));
  w.Gauge("wharf_deliveries_in_flight", "Deliveries not yet settled, all queues.",
          static_cast<double>(m.deliveries_in_flight));
  w.Gauge("wharf_store_writable", "1 while the message store writes; 0 while it fails.",
          m.store_writable ? 1 : 0);
  w.Gauge("wharf_publishing_blocked",
          "1 while flow control blocks publishers (a memory or disk watermark is crossed).",
          m.publishing_blocked ? 1 : 0);
  if (frames) {
    w.Gauge("wharf_partial_frame_bytes",
            "Memory connections hold for frames above 64 KiB still arriving (beyond 64 KiB each).",
            static_cast<double>(frames->held_bytes));
    w.Gauge("wharf_partial_frame_reserved_bytes",
            "Bytes of the partial frame budget reserved by frames being received.",
            static_cast<double>(frames->reserved_bytes));
    w.Gauge("wharf_partial_frame_limit_bytes",
            "The partial frame budget ([limits] partial_frame_bytes).",
            static_cast<double>(frames->limit_bytes));
    w.Gauge("wharf_partial_frame_waiting_connections",
            "Connections not read while their large frame waits for the partial frame budget.",
            static_cast<double>(frames->waiting));
    w.Header("wharf_frame_timeouts_total", "counter",
             "Connections closed because a frame was not complete within [limits] "
             "frame_timeout_ms.");
    w.Sample("wharf_frame_timeouts_total", "", static_cast<double>(frames->timeouts_total));
  }

  w.PerQueue(m, "wharf_queue_ready", "gauge", "Messages waiting to be delivered.", all,
             [](const QueueMetrics& q) { return static_cast<double>(q.info.ready); });
  w.PerQueue(m, "wharf_queue_in_flight", "gauge", "Deliveries not yet settled.", all,
             [](const QueueMetrics& q) { return static_cast<double>(q.info.in_flight); });
  w.PerQueue(m, "wharf_queue_delayed", "gauge", "Messages waiting for their delivery time.", all,
             [](const QueueMetrics& q) { return static_cast<double>(q.info.delayed); });
  w.PerQueue(
      m, "wharf_queue_purge_reclaiming", "gauge",
      "Purged messages still being removed from the disk; absent when none.",
      [](const QueueMetrics& q) { return q.info.purge_reclaiming > 0; },
      [](const QueueMetrics& q) { return static_cast<double>(q.info.purge_reclaiming); });
  auto grouped = [](const QueueMetrics& q) {
    return q.info.arguments.contains("x-message-groups");
  };
  w.PerQueue(m, "wharf_queue_groups", "gauge",
             "Message groups with a ready message in memory or a delivery out (x-message-groups "
             "queues only).",
             grouped, [](const QueueMetrics& q) { return static_cast<double>(q.info.groups); });
  w.PerQueue(m, "wharf_queue_groups_held", "gauge",
             "Message groups waiting for a delivery to be settled or a retry's backoff "
             "(x-message-groups queues only).",
             grouped,
             [](const QueueMetrics& q) { return static_cast<double>(q.info.groups_held); });
  w.PerQueue(m, "wharf_queue_consumers", "gauge", "Active consumers.", all,
             [](const QueueMetrics& q) { return static_cast<double>(q.info.consumers); });
  w.PerQueue(
      m, "wharf_queue_oldest_ready_age_seconds", "gauge",
      "Age (since publish) of the next ready message; absent when none is in RAM.",
      [](const QueueMetrics& q) { return q.info.head_published_at_ms != 0; },
      [now_ms](const QueueMetrics& q) {
        return static_cast<double>(std::max<int64_t>(0, now_ms - q.info.head_published_at_ms)) /
               1000;
      });
  w.PerQueue(
      m, "wharf_dead_letter_queue_ready", "gauge",
      "Ready messages of each queue that another queue dead-letters into: alert above zero.",
      [](const QueueMetrics& q) { return q.dead_letter_queue; },
      [](const QueueMetrics& q) { return static_cast<double>(q.info.ready); });

  struct Counter {
    const char* name;
    const char* help;
    std::function<double(const QueueMetrics&)> value;
  };
  const Counter counters[] = {
      {"wharf_queue_published_total", "Messages enqueued (published, dead-lettered or moved in).",
       [](const QueueMetrics& q) { return static_cast<double>(q.info.published_total); }},
      {"wharf_queue_delivered_total", "Deliveries, redeliveries included.",
       [](const QueueMetrics& q) { return static_cast<double>(q.info.delivered_total); }},
      {"wharf_queue_redelivered_total", "Deliveries of messages received before.",
       [](const QueueMetrics& q) { return static_cast<double>(q.redelivered_total); }},
      {"wharf_queue_acked_total", "Acks.",
       [](const QueueMetrics& q) { return static_cast<double>(q.info.acked_total); }},
      {"wharf_queue_nacked_total", "Nacks and rejects.",
       [](const QueueMetrics& q) { return static_cast<double>(q.nacked_total); }},
      {"wharf_queue_lease_expired_total", "Deliveries whose lease ran out.",
       [](const QueueMetrics& q) { return static_cast<double>(q.lease_expired_total); }},
      {"wharf_queue_dead_lettered_total",
       "Messages that left for the dead-letter target (or were dropped without one).",
       [](const QueueMetrics& q) { return static_cast<double>(q.dead_lettered_total); }},
      {"wharf_queue_expired_total", "Messages whose TTL ran out.",
       [](const QueueMetrics& q) { return static_cast<double>(q.expired_total); }},
      {"wharf_queue_duplicates_total",
       "Publishes dropped by the queue's deduplication window (x-deduplication-window).",
       [](const QueueMetrics& q) { return static_cast<double>(q.duplicates_total); }},
  };
  for (const Counter& c : counters) w.PerQueue(m, c.name, "counter", c.help, all, c.value);

  w.Histogram("wharf_confirm_latency_seconds",
              "From a persistent publish to its confirm (on disk), as the broker sees it.",
              m.confirm_ms);
  if (store) {
    w.Histogram("wharf_store_sync_latency_seconds",
                "Synced writes of the message store (group commits), fsync included.",
                store->sync_ms);
    struct StoreCounter {
      const char* name;
      const char* help;
      uint64_t value;
    };
    const StoreCounter store_counters[] = {
        {"wharf_store_bytes_written_total", "Bytes written to the message store.",
         store->bytes_written},
        {"wharf_store_writes_total", "Writes (groups of commits) to the store.", store->writes},
        {"wharf_store_syncs_total", "Synced writes to the store.", store->syncs},
        {"wharf_store_dedup_reads_total",
         "Deduplication keys read from the store (keys above every record of their queue, or "
         "in a stream, are new without a read).",
         store->dedup_reads},
        {"wharf_store_dedup_runs_total",
         "Deduplication runs written: a write group's new keys of one queue with no record "
         "between them, in one record.",
         store->dedup_runs},
        {"wharf_store_dedup_runs_converted_total",
         "Deduplication runs found interleaved with other keys, rewritten as records of their "
         "own.",
         store->dedup_runs_converted},
        {"wharf_store_dedup_run_lookups_total",
         "Deduplication keys looked up among their queue's runs.", store->dedup_run_lookups},
        {"wharf_store_dedup_stream_keys_total",
         "Deduplication keys below the highest of their queue found new without a read, in a "
         "span known to hold no record (a stream: a publisher's own rising keys).",
         store->dedup_stream_keys},
        {"wharf_store_dedup_streams_total",
         "Deduplication streams learnt: spans below the highest key known to hold no record, "
         "each found with two seeks.",
         store->dedup_streams},
    };
    for (const StoreCounter& c : store_counters) {
      w.Header(c.name, "counter", c.help);
      w.Sample(c.name, "", static_cast<double>(c.value));
    }
  }
  return w.Take();
}

}  // namespace wharf::server
