/*
 * pgpb-jdbc: pgpathbench's JDBC client (seed 003's jdbctest), pgjdbc. Contract: clients/CONTRACT.md.
 *
 * Modes: normal (Statement.executeQuery, autocommit on, the whole result in memory), cursor:N
 * (autocommit off + setFetchSize(N): pgjdbc then reads N rows per round trip through a portal),
 * copy (CopyManager.copyOut: COPY (SQL) TO STDOUT, one byte[] per row).
 * Run: java -jar .tools/clients/pgpb-jdbc.jar -c CONNINFO -s SQL ...
 */
package pgpathbench.clients;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import org.postgresql.PGConnection;
import org.postgresql.copy.CopyOut;
import org.postgresql.util.DriverInfo;

public final class PgpbJdbc {
    static final String CLIENT = "pgpb_jdbc";
    static final String USAGE = "usage: " + CLIENT + " -c CONNINFO -s SQL [-k 0|1] [-n ITERATIONS] [-p 0|1] [-o DEST]\n"
            + "       [-m normal|cursor:N|copy]   (see clients/CONTRACT.md)";
    static final int OUTBUF_SIZE = 1 << 20; // output is hashed and written in 1 MiB blocks, never per row

    /** A usage error: message on stderr, exit 2. */
    static final class Usage extends Exception {
        Usage(String msg) { super(msg); }
    }

    // ---- options ------------------------------------------------------------------------------
    static String conninfo, sql, dest = "/dev/null", mode = "normal";
    static long keep = 1, iterations = 1, print = 0;
    static int cursorRows = 0;
    static boolean copyMode;
    static String query, url;
    static final Properties props = new Properties();

    // ---- measurements -------------------------------------------------------------------------
    static long rows, nbytes;
    static final RowChecksum checksum = new RowChecksum();
    static double connectS, execS, fetchS;
    static long connectBegan; // System.nanoTime that began the last connection
    static final IterationHistogram iterationUs = new IterationHistogram();
    static String phase = "connection failed"; // what an SQLException means: set before each step

    static long parseLong(String opt, String s, long min, long max) throws Usage {
        try {
            long v = Long.parseLong(s);
            if (v >= min && v <= max) return v;
        } catch (NumberFormatException e) { /* below */ }
        throw new Usage("-" + opt + ": '" + s + "' is not an integer in " + min + ".." + max);
    }

    // ---- output: COPY-text rendering into one buffer, hashed (and written) per block -----------
    static byte[] buf = new byte[OUTBUF_SIZE];
    static int len;
    static OutputStream out;

    /** Escapes of COPY TO's text format (CopyAttributeOutText) for ASCII; 0 = keep the char. */
    static final byte[] ESC = new byte[128];
    static {
        ESC['\\'] = '\\'; ESC['\b'] = 'b'; ESC['\f'] = 'f'; ESC['\n'] = 'n'; ESC['\r'] = 'r'; ESC['\t'] = 't';
        ESC[0x0b] = 'v';
    }

    /** The contract's checksum (RowChecksum) of the next n bytes of COPY text, and their count. */
    static void hash(byte[] b, int off, int n) {
        checksum.update(b, off, n);
        nbytes += n;
    }

    static void flush() throws IOException {
        hash(buf, 0, len);
        if (print == 1) out.write(buf, 0, len);
        len = 0;
    }

    /** Room for n more bytes; a value larger than the buffer grows it (rare, no per-row cost). */
    static void reserve(int n) throws IOException {
        if (len + n <= buf.length) return;
        flush();
        if (n > buf.length) buf = new byte[n];
    }

    static void putByte(char c) throws IOException {
        reserve(1);
        buf[len++] = (byte) c;
    }

    /** A value, escaped and encoded to UTF-8 straight into the buffer (no byte[] per value). */
    static void putText(String s) throws IOException {
        int n = s.length();
        reserve(3 * n); // worst case: 3 bytes per char (a surrogate pair: 4 bytes for 2 chars)
        byte[] b = buf;
        int p = len;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                if (c >= 0x20 && c != '\\') {
                    b[p++] = (byte) c;
                } else if (ESC[c] != 0) {
                    b[p++] = '\\';
                    b[p++] = ESC[c];
                } else {
                    b[p++] = (byte) c;
                }
            } else if (c < 0x800) {
                b[p++] = (byte) (0xc0 | (c >> 6));
                b[p++] = (byte) (0x80 | (c & 0x3f));
            } else if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                int cp = Character.toCodePoint(c, s.charAt(++i));
                b[p++] = (byte) (0xf0 | (cp >> 18));
                b[p++] = (byte) (0x80 | ((cp >> 12) & 0x3f));
                b[p++] = (byte) (0x80 | ((cp >> 6) & 0x3f));
                b[p++] = (byte) (0x80 | (cp & 0x3f));
            } else {
                b[p++] = (byte) (0xe0 | (c >> 12));
                b[p++] = (byte) (0x80 | ((c >> 6) & 0x3f));
                b[p++] = (byte) (0x80 | (c & 0x3f));
            }
        }
        len = p;
    }

    /** COPY data is already in this form (a CopyData message: one row, or any piece of the byte
     *  stream, see hash): hash it directly, or buffer it when printing. */
    static void putRaw(byte[] data) throws IOException {
        rows++;
        if (print == 0) {
            hash(data, 0, data.length);
            return;
        }
        reserve(data.length);
        System.arraycopy(data, 0, buf, len, data.length);
        len += data.length;
    }

    // ---- libpq conninfo -> pgjdbc URL and properties -------------------------------------------
    static Map<String, String> parseConninfo(String s) throws Usage {
        if (s.startsWith("postgresql://") || s.startsWith("postgres://")) return parseUri(s);
        Map<String, String> m = new LinkedHashMap<>();
        int i = 0, n = s.length();
        while (true) {
            while (i < n && Character.isWhitespace(s.charAt(i))) i++;
            if (i >= n) return m;
            int k = i;
            while (i < n && s.charAt(i) != '=' && !Character.isWhitespace(s.charAt(i))) i++;
            String key = s.substring(k, i);
            while (i < n && Character.isWhitespace(s.charAt(i))) i++;
            if (i >= n || s.charAt(i) != '=') throw new Usage("-c: missing \"=\" after \"" + key + "\" in connection info string");
            i++;
            while (i < n && Character.isWhitespace(s.charAt(i))) i++;
            StringBuilder v = new StringBuilder();
            if (i < n && s.charAt(i) == '\'') { // libpq quoting: '...' with \' and \\
                for (i++;; ) {
                    if (i >= n) throw new Usage("-c: unterminated quoted string in connection info string");
                    char c = s.charAt(i++);
                    if (c == '\'') break;
                    if (c == '\\' && i < n) c = s.charAt(i++);
                    v.append(c);
                }
            } else {
                while (i < n && !Character.isWhitespace(s.charAt(i))) {
                    char c = s.charAt(i++);
                    if (c == '\\' && i < n) c = s.charAt(i++);
                    v.append(c);
                }
            }
            m.put(key, v.toString());
        }
    }

    static String decode(String s) {
        return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8); // '+' is '+' to libpq
    }

    static Map<String, String> parseUri(String s) {
        Map<String, String> m = new LinkedHashMap<>();
        String rest = s.substring(s.indexOf("://") + 3);
        int q = rest.indexOf('?');
        if (q >= 0) {
            for (String kv : rest.substring(q + 1).split("&")) {
                int eq = kv.indexOf('=');
                if (eq > 0) m.put(decode(kv.substring(0, eq)), decode(kv.substring(eq + 1)));
            }
            rest = rest.substring(0, q);
        }
        int slash = rest.indexOf('/');
        if (slash >= 0) {
            if (slash + 1 < rest.length()) m.putIfAbsent("dbname", decode(rest.substring(slash + 1)));
            rest = rest.substring(0, slash);
        }
        int at = rest.lastIndexOf('@');
        if (at >= 0) {
            String userinfo = rest.substring(0, at);
            int colon = userinfo.indexOf(':');
            m.putIfAbsent("user", decode(colon >= 0 ? userinfo.substring(0, colon) : userinfo));
            if (colon >= 0) m.putIfAbsent("password", decode(userinfo.substring(colon + 1)));
            rest = rest.substring(at + 1);
        }
        int colon = rest.startsWith("[") ? rest.indexOf(':', rest.indexOf(']')) : rest.lastIndexOf(':');
        if (colon >= 0) {
            m.putIfAbsent("port", rest.substring(colon + 1));
            rest = rest.substring(0, colon);
        }
        if (!rest.isEmpty()) m.putIfAbsent("host", decode(rest.replaceAll("^\\[|\\]$", "")));
        return m;
    }

    static void buildUrl() throws Usage {
        props.setProperty("binaryTransfer", "false"); // text format everywhere, as every client
        // libpq's PGOPTIONS, which pgjdbc ignores, as the default of its options: the conninfo's (or
        // the JDBC URL's) options win over it, as they do in libpq.
        String pgoptions = System.getenv("PGOPTIONS");
        if (pgoptions != null && !pgoptions.isBlank()) props.setProperty("options", pgoptions);
        if (conninfo.startsWith("jdbc:postgresql:")) { // a JDBC URL is used as it is
            url = conninfo;
            return;
        }
        Map<String, String> m = parseConninfo(conninfo);
        String host = m.remove("host");
        if (host == null || host.isEmpty())
            throw new Usage("-c: no host: libpq would use its default unix socket, and pgjdbc has no unix sockets; give host=NAME");
        if (host.startsWith("/") || host.startsWith("@"))
            throw new Usage("-c: host=" + host + " is a unix socket; pgjdbc has no unix sockets (use TCP, e.g. host=127.0.0.1)");
        String port = m.getOrDefault("port", "5432");
        m.remove("port");
        parseLong("c port", port, 1, 65535);
        // libpq's defaults: the OS user, and a database named as the user
        String user = m.containsKey("user") ? m.remove("user") : System.getProperty("user.name");
        String dbname = m.containsKey("dbname") ? m.remove("dbname") : user;
        props.setProperty("user", user);
        // The keywords taken here are clients.py's JDBC_CONNINFO_KEYWORDS (a run refuses a DSN with others).
        // sslrootcert: pgjdbc (LibPQFactory) reads libpq's PEM root certificate file as it is; libpq's
        // client key (PEM) is not pgjdbc's (PKCS-8 DER or PKCS-12), so sslcert/sslkey stay refused.
        String[][] names = {{"password", "password"}, {"sslmode", "sslmode"}, {"sslrootcert", "sslrootcert"},
                {"connect_timeout", "connectTimeout"}, {"application_name", "ApplicationName"}, {"options", "options"}};
        for (String[] kv : names) {
            String v = m.remove(kv[0]);
            if (v != null) props.setProperty(kv[1], v);
        }
        if (!m.isEmpty())
            throw new Usage("-c: " + m.keySet().iterator().next() + ": conninfo keyword without a pgjdbc equivalent here");
        url = "jdbc:postgresql://" + (host.contains(":") ? "[" + host + "]" : host) + ":" + port + "/"
                + URLEncoder.encode(dbname, StandardCharsets.UTF_8);
    }

    // ---- the driver -----------------------------------------------------------------------------
    static Connection connect() throws SQLException {
        phase = "connection failed";
        long t = connectBegan = System.nanoTime();
        Connection c = DriverManager.getConnection(url, props);
        if (cursorRows > 0) c.setAutoCommit(false); // pgjdbc uses a cursor only inside a transaction
        connectS += (System.nanoTime() - t) / 1e9;
        return c;
    }

    /** One iteration's query: execS, fetchS and its iteration time, from the same clock reads. */
    static void runQuery(Connection c) throws SQLException, IOException {
        phase = "query failed";
        long began = System.nanoTime(), t = began;
        if (copyMode) {
            CopyOut copy = c.unwrap(PGConnection.class).getCopyAPI().copyOut(query); // at CopyOutResponse
            execS += (System.nanoTime() - t) / 1e9;
            t = System.nanoTime();
            byte[] row;
            while ((row = copy.readFromCopy()) != null) putRaw(row); // one CopyData message per row
        } else {
            try (Statement st = c.createStatement()) {
                if (cursorRows > 0) st.setFetchSize(cursorRows);
                ResultSet rs = st.executeQuery(query); // normal: the whole result; cursor: the first N rows
                execS += (System.nanoTime() - t) / 1e9;
                t = System.nanoTime();
                int ncols = rs.getMetaData().getColumnCount();
                while (rs.next()) {
                    for (int i = 1; i <= ncols; i++) {
                        if (i > 1) putByte('\t');
                        String v = rs.getString(i);
                        if (v == null) {
                            putByte('\\');
                            putByte('N');
                        } else {
                            putText(v);
                        }
                    }
                    putByte('\n');
                    rows++;
                }
                rs.close();
            }
            if (cursorRows > 0) c.commit();
        }
        long ended = System.nanoTime();
        fetchS += (ended - t) / 1e9;
        iterationUs.record(keep == 1 ? began : connectBegan, ended); // -k 0: the iteration began with its connect
    }

    static void parseArgs(String[] args) throws Usage {
        for (int i = 0; i < args.length; i++) { // getopt-like: "-k 1" or "-k1"
            String a = args[i];
            if (a.equals("-h")) {
                System.out.println(USAGE);
                System.exit(0);
            }
            if (a.length() < 2 || a.charAt(0) != '-' || "csknpom".indexOf(a.charAt(1)) < 0) {
                if (a.startsWith("-")) throw new Usage("unknown option " + a);
                throw new Usage("unexpected argument '" + a + "'");
            }
            String v = a.length() > 2 ? a.substring(2) : (++i < args.length ? args[i] : null);
            if (v == null) throw new Usage(a + " needs a value");
            switch (a.charAt(1)) {
                case 'c': conninfo = v; break;
                case 's': sql = v; break;
                case 'k': keep = parseLong("k", v, 0, 1); break;
                case 'n': iterations = parseLong("n", v, 1, 1000000000); break;
                case 'p': print = parseLong("p", v, 0, 1); break;
                case 'o': dest = v; break;
                case 'm': mode = v; break;
                default: throw new AssertionError();
            }
        }
        if (conninfo == null || sql == null) throw new Usage("-c CONNINFO and -s SQL are required");
        if (mode.startsWith("cursor:")) cursorRows = (int) parseLong("m cursor:N, N", mode.substring(7), 1, 1000000000);
        else if (mode.equals("copy")) copyMode = true;
        else if (!mode.equals("normal")) throw new Usage("-m " + mode + ": not a mode of this client (normal, cursor:N, copy)");
    }

    static void run(String[] args) throws Usage, SQLException, IOException {
        parseArgs(args);
        buildUrl();
        // COPY (...) and cursors reject a trailing ';': strip it (and white space), as every client does.
        query = sql.replaceAll("[\\s;]+$", "");
        if (copyMode) query = "COPY (" + query + ") TO STDOUT";
        try {
            out = new FileOutputStream(dest);
        } catch (IOException e) {
            throw new Usage("-o: cannot open " + dest + ": " + e.getMessage());
        }

        long t0 = System.nanoTime();
        Connection c = keep == 1 ? connect() : null;
        for (long i = 0; i < iterations; i++) {
            if (keep == 0) c = connect();
            runQuery(c);
            if (keep == 0) c.close();
        }
        if (keep == 1) c.close();
        long t = System.nanoTime();
        flush();
        fetchS += (System.nanoTime() - t) / 1e9;
        out.close();
        double totalS = (System.nanoTime() - t0) / 1e9;

        String version = "pgjdbc " + DriverInfo.DRIVER_VERSION + " (Java " + Runtime.version() + ")";
        System.out.print(String.format(Locale.ROOT,
                "{\"client\":\"jdbc\",\"version\":\"%s\",\"mode\":\"%s\",\"iterations\":%d,\"rows\":%d,\"bytes\":%d,"
                        + "\"checksum\":\"%016x\",\"connect_s\":%.6f,\"exec_s\":%.6f,\"fetch_s\":%.6f,\"total_s\":%.6f,"
                        + "\"iteration_us\":%s}\n",
                version, mode, iterations, rows, nbytes, checksum.sum, connectS, execS, fetchS, totalS, iterationUs.json()));
        System.out.flush();
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Usage e) {
            System.err.println(CLIENT + ": " + e.getMessage() + "\n" + USAGE);
            System.exit(2);
        } catch (SQLException e) {
            System.err.println(CLIENT + ": " + phase + ": " + e.getMessage());
            System.exit(3);
        } catch (IOException e) {
            System.err.println(CLIENT + ": -o: cannot write " + dest + ": " + e.getMessage());
            System.exit(1);
        }
    }
}
