import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Options shared by the test programs, after their positional arguments: {@code --ak KEY --sk SECRET}
 * signs every request with RocketMQ's AclClientRPCHook; {@code --tls} dials TLS (the trust settings come
 * from TlsSystemConfig's system properties, e.g. -Dtls.client.trustCertPath=...).
 */
final class ClientOptions {
    String accessKey;
    String secretKey;
    boolean tls;
    final java.util.List<String> positional = new java.util.ArrayList<>();

    static ClientOptions parse(String[] args) {
        ClientOptions o = new ClientOptions();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--ak": o.accessKey = args[++i]; break;
                case "--sk": o.secretKey = args[++i]; break;
                case "--tls": o.tls = true; break;
                default: o.positional.add(args[i]);
            }
        }
        return o;
    }

    RPCHook rpcHook() {
        return accessKey == null ? null : new AclClientRPCHook(new SessionCredentials(accessKey, secretKey));
    }

    String arg(int i) {
        if (i >= positional.size()) {
            throw new IllegalArgumentException("missing argument " + (i + 1));
        }
        return positional.get(i);
    }

    static String oneLine(Throwable e) {
        String m = e.getMessage() == null ? "" : e.getMessage().replace('\n', ' ');
        return e.getClass().getName() + ": " + m;
    }
}
