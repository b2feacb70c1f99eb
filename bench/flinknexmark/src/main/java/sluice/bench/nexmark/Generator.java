package sluice.bench.nexmark;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.ZoneOffset;

import org.apache.flink.types.Row;

/**
 * bench/nexmark's generator (generator.go) in Java: every event a pure
 * function of its number and the seed, SplitMix64 seeded per event, so
 * that Flink reads the events Sluice reads. Only the defaults of
 * DefaultConfig are ported (events in order, 1:3:46, 10 M events/s of
 * event time).
 */
final class Generator implements Serializable {
    private static final long serialVersionUID = 1L;

    static final long FIRST_PERSON_ID = 1000, FIRST_AUCTION_ID = 1000, FIRST_CATEGORY_ID = 10, NUM_CATEGORIES = 5;
    static final long PERSON_ID_LEAD = 10, AUCTION_ID_LEAD = 10, HOT_BATCH = 100;
    static final long HOT_CHANNELS_RATIO = 2;
    static final int NUM_CHANNELS = 10_000;

    final long seed;
    final double rate;
    final long baseTime = 1_735_689_600_000L;
    final long personProportion = 1, auctionProportion = 3, bidProportion = 46;
    final long total = personProportion + auctionProportion + bidProportion;
    final long numActivePeople = 1000, numInFlightAuctions = 100;
    final long hotAuctionRatio = 2, hotSellersRatio = 4, hotBiddersRatio = 4;
    final int avgPersonByteSize = 200, avgAuctionByteSize = 500, avgBidByteSize = 100;
    final double delayUs;
    final String[] channelNames = new String[NUM_CHANNELS], channelUrls = new String[NUM_CHANNELS];
    final String[] hotNames = {"Google", "Facebook", "Baidu", "Apple"};
    final String[] hotUrls = new String[4];

    Generator(long seed, double rate) {
        this.seed = seed;
        this.rate = rate;
        this.delayUs = 1e6 / rate;
        Rng r = new Rng(seed, -1L); // math.MaxUint64
        for (int i = 0; i < hotUrls.length; i++) {
            hotUrls[i] = baseUrl(r);
        }
        for (int i = 0; i < NUM_CHANNELS; i++) {
            String u = baseUrl(r);
            if (r.intn(10) > 0) {
                u += "&channel_id=" + (Integer.reverse(i) & Integer.MAX_VALUE);
            }
            channelNames[i] = "channel-" + i;
            channelUrls[i] = u;
        }
    }

    long timeOf(long m) {
        return baseTime + (long) (m * delayUs) / 1000;
    }

    static LocalDateTime ts(long ms) {
        return LocalDateTime.ofEpochSecond(Math.floorDiv(ms, 1000), (int) Math.floorMod(ms, 1000) * 1_000_000, ZoneOffset.UTC);
    }

    int kindOf(long id) {
        long rem = id % total;
        if (rem < personProportion) {
            return 0;
        }
        return rem < personProportion + auctionProportion ? 1 : 2;
    }

    long lastPerson(long id) {
        long epoch = id / total, off = id % total;
        return epoch * personProportion + Math.min(off, personProportion - 1);
    }

    long lastAuction(long id) {
        long p = personProportion, a = auctionProportion;
        long epoch = id / total, off = id % total;
        if (off < p) {
            epoch--;
            off = a - 1;
        } else if (off >= p + a) {
            off = a - 1;
        } else {
            off -= p;
        }
        return epoch * a + off;
    }

    long randomPerson(long id, Rng r) {
        long people = lastPerson(id) + 1;
        long active = Math.min(people, numActivePeople);
        return people - active + r.intn(active + PERSON_ID_LEAD);
    }

    long randomAuction(long id, Rng r) {
        long last = lastAuction(id);
        long lo = Math.max(last - numInFlightAuctions, 0);
        return lo + r.intn(last - lo + 1 + AUCTION_ID_LEAD);
    }

    static final String[] US_STATES = {"AZ", "CA", "ID", "OR", "WA", "WY"};
    static final String[] US_CITIES = {"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"};
    static final String[] FIRST_NAMES = {"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"};
    static final String[] LAST_NAMES = {"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"};

    /** Event n as the row of the Nexmark DDL: event_type, person, auction, bid. */
    Row event(long n) {
        long id = n;
        long t = timeOf(id);
        Rng r = new Rng(seed, id);
        switch (kindOf(id)) {
            case 0:
                return Row.of(0, person(id, t, r), null, null);
            case 1:
                return Row.of(1, null, auction(id, t, r), null);
            default:
                return Row.of(2, null, null, bid(id, t, r));
        }
    }

    Row person(long id, long t, Rng r) {
        long pid = lastPerson(id) + FIRST_PERSON_ID;
        String name = FIRST_NAMES[(int) r.intn(FIRST_NAMES.length)] + " " + LAST_NAMES[(int) r.intn(LAST_NAMES.length)];
        String email = r.str(7) + "@" + r.str(5) + ".com";
        byte[] cc = new byte[19];
        for (int i = 0; i < 4; i++) {
            if (i > 0) {
                cc[i * 5 - 1] = ' ';
            }
            long v = r.intn(10000);
            for (int j = 3; j >= 0; j--) {
                cc[i * 5 + j] = (byte) ('0' + v % 10);
                v /= 10;
            }
        }
        String card = new String(cc, StandardCharsets.ISO_8859_1);
        String city = US_CITIES[(int) r.intn(US_CITIES.length)];
        String state = US_STATES[(int) r.intn(US_STATES.length)];
        int size = 8 + name.length() + email.length() + card.length() + city.length() + state.length();
        String extra = r.extra(size, avgPersonByteSize);
        return Row.of(pid, name, email, card, city, state, ts(t), extra);
    }

    Row auction(long id, long t, Rng r) {
        long aid = lastAuction(id) + FIRST_AUCTION_ID;
        long seller;
        if (r.intn(hotSellersRatio) > 0) {
            seller = lastPerson(id) / HOT_BATCH * HOT_BATCH;
        } else {
            seller = randomPerson(id, r);
        }
        seller += FIRST_PERSON_ID;
        long category = FIRST_CATEGORY_ID + r.intn(NUM_CATEGORIES);
        long initialBid = r.price();
        long ahead = numInFlightAuctions * total / auctionProportion;
        long horizon = timeOf(id + ahead) - t;
        long expires = t + 1 + r.intn(Math.max(2 * horizon, 1));
        String itemName = r.str(20);
        String description = r.str(100);
        long reserve = initialBid + r.price();
        int size = 8 + itemName.length() + description.length() + 8 + 8 + 8 + 8 + 8;
        String extra = r.extra(size, avgAuctionByteSize);
        return Row.of(aid, itemName, description, initialBid, reserve, ts(t), ts(expires), seller, category, extra);
    }

    Row bid(long id, long t, Rng r) {
        long auction;
        if (r.intn(hotAuctionRatio) > 0) {
            auction = lastAuction(id) / HOT_BATCH * HOT_BATCH;
        } else {
            auction = randomAuction(id, r);
        }
        auction += FIRST_AUCTION_ID;
        long bidder;
        if (r.intn(hotBiddersRatio) > 0) {
            bidder = lastPerson(id) / HOT_BATCH * HOT_BATCH + 1;
        } else {
            bidder = randomPerson(id, r);
        }
        bidder += FIRST_PERSON_ID;
        long price = r.price();
        String channel, url;
        if (r.intn(HOT_CHANNELS_RATIO) > 0) {
            int i = (int) r.intn(hotNames.length);
            channel = hotNames[i];
            url = hotUrls[i];
        } else {
            int i = (int) r.intn(NUM_CHANNELS);
            channel = channelNames[i];
            url = channelUrls[i];
        }
        String extra = r.extra(8 + 8 + 8 + 8, avgBidByteSize);
        return Row.of(auction, bidder, price, channel, url, ts(t), extra);
    }

    static String baseUrl(Rng r) {
        return "https://www.nexmark.com/" + r.strFill(5, '_') + "/" + r.strFill(5, '_') + "/" + r.strFill(5, '_') + "/item.htm?query=1";
    }

    /** SplitMix64, seeded per event from the seed and the event id (generator.go's rng). */
    static final class Rng {
        long s;

        Rng(long seed, long id) {
            s = seed * 0x9e3779b97f4a7c15L ^ id;
            next();
        }

        long next() {
            s += 0x9e3779b97f4a7c15L;
            long z = s;
            z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
            z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
            return z ^ (z >>> 31);
        }

        /** A number in [0, n), n > 0: the high word of next() * n. */
        long intn(long n) {
            long a = next();
            return Math.multiplyHigh(a, n) + ((a >> 63) & n) + ((n >> 63) & a);
        }

        double flt() {
            return (double) (next() >>> 11) / (double) (1L << 53);
        }

        long price() {
            return Math.round(Math.pow(10, flt() * 6) * 100);
        }

        String str(int max) {
            return strFill(max, ' ');
        }

        String strFill(int max, char fill) {
            int n = (int) (3 + intn(max - 3));
            byte[] b = new byte[n];
            for (int i = 0; i < n; i++) {
                if (intn(13) == 0) {
                    b[i] = (byte) fill;
                } else {
                    b[i] = (byte) ('a' + intn(26));
                }
            }
            int lo = 0, hi = n;
            if (fill == ' ') {
                while (lo < hi && b[lo] == ' ') {
                    lo++;
                }
                while (hi > lo && b[hi - 1] == ' ') {
                    hi--;
                }
            }
            return new String(b, lo, hi - lo, StandardCharsets.ISO_8859_1);
        }

        String exact(int n) {
            byte[] b = new byte[n];
            long v = 0;
            int left = 0;
            for (int i = 0; i < n; i++) {
                if (left == 0) {
                    v = next();
                    left = 13;
                }
                b[i] = (byte) ('a' + Long.remainderUnsigned(v, 26));
                v = Long.divideUnsigned(v, 26);
                left--;
            }
            return new String(b, StandardCharsets.ISO_8859_1);
        }

        String extra(int size, int avg) {
            if (size > avg) {
                return "";
            }
            avg -= size;
            int delta = (int) Math.round(avg * 0.2);
            int n = avg - delta;
            if (delta > 0) {
                n += (int) intn(2L * delta);
            }
            return exact(n);
        }
    }
}
