package sluice.bench.nexmark;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.TableDescriptor;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;

/**
 * Nexmark on Flink, the other half of bench/nexmark's side-by-side table:
 * Nexmark's SQL queries (the Flink Nexmark benchmark's, written from the
 * Nexmark specification) over bench/nexmark's events, on the local
 * mini-cluster in this one JVM, with the RocksDB state backend and
 * exactly-once checkpoints, every query's result into a blackhole sink.
 * For each query it prints one line that bench/nexmark -flink parses:
 *
 * <pre>flink query=q11 events=5000000 wall_s=23.5 cpu_s=40.1</pre>
 *
 * where cpu_s is the CPU time of the whole process (user + system, every
 * thread) during the query, as bench/nexmark measures Sluice.
 *
 * <pre>java -jar target/flinknexmark.jar [-query q0,q11] [-events 5000000] [-parallelism 2]
 *     [-checkpoint-interval-ms 10000] [-backend rocksdb|hashmap] [-warmup-events 1000000] [-dir /tmp]</pre>
 */
public final class NexmarkFlink {

    /** The queries, as the Flink Nexmark benchmark states them. */
    static final Map<String, String> QUERIES = new LinkedHashMap<>();

    static {
        QUERIES.put("q0", "SELECT auction, bidder, price, `dateTime`, extra FROM bid");
        QUERIES.put("q1", "SELECT auction, bidder, 0.908 * price AS price, `dateTime`, extra FROM bid");
        QUERIES.put("q2", "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0");
        QUERIES.put("q3", "SELECT P.name, P.city, P.state, A.id FROM auction AS A INNER JOIN person AS P ON A.seller = P.id"
                + " WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')");
        QUERIES.put("q4", "SELECT Q.category, AVG(Q.final) FROM ("
                + " SELECT MAX(B.price) AS final, A.category FROM auction A, bid B"
                + " WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires"
                + " GROUP BY A.id, A.category) Q GROUP BY Q.category");
        String hop = "TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))";
        QUERIES.put("q5", "SELECT AuctionBids.auction, AuctionBids.num FROM ("
                + " SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime FROM " + hop
                + " GROUP BY auction, window_start, window_end) AS AuctionBids"
                + " JOIN (SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime FROM ("
                + " SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime FROM " + hop
                + " GROUP BY auction, window_start, window_end) AS CountBids"
                + " GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids"
                + " ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime"
                + " AND AuctionBids.num >= MaxBids.maxn");
        QUERIES.put("q7", "SELECT B.auction, B.price, B.bidder, B.`dateTime`, B.extra FROM bid B JOIN ("
                + " SELECT MAX(price) AS maxprice, window_end AS `dateTime`"
                + " FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))"
                + " GROUP BY window_start, window_end) B1 ON B.price = B1.maxprice"
                + " WHERE B.`dateTime` BETWEEN B1.`dateTime` - INTERVAL '10' SECOND AND B1.`dateTime`");
        QUERIES.put("q8", "SELECT P.id, P.name, P.starttime FROM ("
                + " SELECT id, name, window_start AS starttime, window_end AS endtime"
                + " FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))"
                + " GROUP BY id, name, window_start, window_end) P JOIN ("
                + " SELECT seller, window_start AS starttime, window_end AS endtime"
                + " FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))"
                + " GROUP BY seller, window_start, window_end) A"
                + " ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime");
        QUERIES.put("q11", "SELECT B.bidder, COUNT(*) AS bid_count,"
                + " SESSION_START(B.`dateTime`, INTERVAL '10' SECOND) AS starttime,"
                + " SESSION_END(B.`dateTime`, INTERVAL '10' SECOND) AS endtime"
                + " FROM bid B GROUP BY B.bidder, SESSION(B.`dateTime`, INTERVAL '10' SECOND)");
    }

    static final TypeInformation<Row> PERSON = Types.ROW_NAMED(
            new String[] {"id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"},
            Types.LONG, Types.STRING, Types.STRING, Types.STRING, Types.STRING, Types.STRING, Types.LOCAL_DATE_TIME, Types.STRING);
    static final TypeInformation<Row> AUCTION = Types.ROW_NAMED(
            new String[] {"id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category", "extra"},
            Types.LONG, Types.STRING, Types.STRING, Types.LONG, Types.LONG, Types.LOCAL_DATE_TIME, Types.LOCAL_DATE_TIME,
            Types.LONG, Types.LONG, Types.STRING);
    static final TypeInformation<Row> BID = Types.ROW_NAMED(
            new String[] {"auction", "bidder", "price", "channel", "url", "dateTime", "extra"},
            Types.LONG, Types.LONG, Types.LONG, Types.STRING, Types.STRING, Types.LOCAL_DATE_TIME, Types.STRING);
    static final TypeInformation<Row> EVENT = Types.ROW_NAMED(
            new String[] {"event_type", "person", "auction", "bid"}, Types.INT, PERSON, AUCTION, BID);

    /** Event n of bench/nexmark's generator. */
    static final class Events implements GeneratorFunction<Long, Row> {
        private final long seed;
        private final double rate;
        private transient Generator gen;

        Events(long seed, double rate) {
            this.seed = seed;
            this.rate = rate;
        }

        @Override
        public void open(SourceReaderContext ctx) {
            gen = new Generator(seed, rate);
        }

        @Override
        public Row map(Long n) {
            return gen.event(n);
        }
    }

    static ConfigOption<String> str(String key) {
        return ConfigOptions.key(key).stringType().defaultValue("");
    }

    /** Runs one query over events events and returns {wall s, CPU s}. */
    static double[] run(String name, long events, int parallelism, long intervalMs, String backend, String dir) throws Exception {
        Configuration conf = new Configuration();
        conf.set(str("state.backend.type"), backend);
        conf.set(str("execution.checkpointing.dir"), "file://" + dir + "/flink-nexmark-checkpoints");
        conf.set(str("execution.checkpointing.mode"), "EXACTLY_ONCE");
        conf.set(str("execution.checkpointing.interval"), intervalMs + " ms");
        conf.set(str("state.backend.incremental"), "true");
        conf.set(str("taskmanager.numberOfTaskSlots"), String.valueOf(parallelism));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);

        DataGeneratorSource<Row> src = new DataGeneratorSource<>(new Events(1, 10_000_000), events, RateLimiterStrategy.noOp(), EVENT);
        DataStream<Row> stream = env.fromSource(src, WatermarkStrategy.noWatermarks(), "nexmark");
        // The Flink Nexmark DDL: one table of events, dateTime the time of
        // its payload, watermarks 4 s behind, and a view per kind.
        tEnv.createTemporaryView("datagen", stream, Schema.newBuilder()
                .columnByExpression("dateTime", "CAST(CASE WHEN event_type = 0 THEN `person`.`dateTime`"
                        + " WHEN event_type = 1 THEN `auction`.`dateTime` ELSE `bid`.`dateTime` END AS TIMESTAMP(3))")
                .watermark("dateTime", "`dateTime` - INTERVAL '4' SECOND")
                .build());
        tEnv.executeSql("CREATE TEMPORARY VIEW person AS SELECT person.id, person.name, person.emailAddress,"
                + " person.creditCard, person.city, person.state, `dateTime`, person.extra FROM datagen WHERE event_type = 0");
        tEnv.executeSql("CREATE TEMPORARY VIEW auction AS SELECT auction.id, auction.itemName, auction.description,"
                + " auction.initialBid, auction.reserve, `dateTime`, CAST(auction.expires AS TIMESTAMP(3)) AS expires,"
                + " auction.seller, auction.category, auction.extra FROM datagen WHERE event_type = 1");
        tEnv.executeSql("CREATE TEMPORARY VIEW bid AS SELECT bid.auction, bid.bidder, bid.price, bid.channel,"
                + " bid.url, `dateTime`, bid.extra FROM datagen WHERE event_type = 2");

        Table q = tEnv.sqlQuery(QUERIES.get(name));
        // Time attributes are plain timestamps in a sink.
        Schema.Builder sink = Schema.newBuilder();
        q.getResolvedSchema().getColumns().forEach(c -> sink.column(c.getName(),
                c.getDataType().getLogicalType().getTypeRoot().name().startsWith("TIMESTAMP")
                        ? org.apache.flink.table.api.DataTypes.TIMESTAMP(3) : c.getDataType()));
        tEnv.createTemporaryTable("blackhole", TableDescriptor.forConnector("blackhole").schema(sink.build()).build());

        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long cpu0 = os.getProcessCpuTime(), t0 = System.nanoTime();
        q.insertInto("blackhole").execute().await();
        long wall = System.nanoTime() - t0, cpu = os.getProcessCpuTime() - cpu0;
        return new double[] {wall / 1e9, cpu / 1e9};
    }

    public static void main(String[] args) throws Exception {
        List<String> queries = new ArrayList<>(QUERIES.keySet());
        long events = 5_000_000L, warmup = 1_000_000L, interval = 10_000;
        int parallelism = 2;
        String backend = "rocksdb", dir = System.getProperty("java.io.tmpdir");
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "-query" -> queries = List.of(args[i + 1].split(","));
                case "-events" -> events = Long.parseLong(args[i + 1]);
                case "-warmup-events" -> warmup = Long.parseLong(args[i + 1]);
                case "-parallelism" -> parallelism = Integer.parseInt(args[i + 1]);
                case "-checkpoint-interval-ms" -> interval = Long.parseLong(args[i + 1]);
                case "-backend" -> backend = args[i + 1];
                case "-dir" -> dir = args[i + 1];
                default -> throw new IllegalArgumentException("unknown flag " + args[i]
                        + " (-query, -events, -warmup-events, -parallelism, -checkpoint-interval-ms, -backend, -dir)");
            }
        }
        for (String q : queries) {
            if (!QUERIES.containsKey(q)) {
                throw new IllegalArgumentException("-query: unknown query " + q + " (" + String.join(",", QUERIES.keySet()) + ")");
            }
        }
        if (warmup > 0) {
            // Warm the JVM (class loading, the planner, JIT) on the first query.
            run(queries.get(0), warmup, parallelism, interval, backend, dir);
        }
        for (String q : queries) {
            double[] r = run(q, events, parallelism, interval, backend, dir);
            System.out.printf("flink query=%s events=%d wall_s=%.3f cpu_s=%.3f%n", q, events, r[0], r[1]);
            System.out.flush();
        }
        System.exit(0);
    }
}
