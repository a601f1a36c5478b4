import java.nio.charset.StandardCharsets;
import java.util.Collections;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * RocketMQ's own remoting client (NettyRemotingClient, as every Java client and mqadmin use it) sending
 * raw requests. Usage: Remoting ADDR REQUEST... [--ak K --sk S] [--tls], where REQUEST is
 * "CODE;key=value;key=value" (header ext fields; "body=TEXT" is the body).
 * Prints per request "RESP code=RESPONSE_CODE remark=REMARK" and "BODY text" when it has a body, or
 * "ERROR exception: message" when the call itself failed (connection refused or closed, timeout).
 */
public class Remoting {
    public static void main(String[] args) throws Exception {
        ClientOptions o = ClientOptions.parse(args);
        NettyClientConfig config = new NettyClientConfig();
        config.setUseTLS(o.tls);
        NettyRemotingClient client = new NettyRemotingClient(config);
        if (o.rpcHook() != null) {
            client.registerRPCHook(o.rpcHook());
        }
        client.start();
        String addr = o.arg(0);
        for (String spec : o.positional.subList(1, o.positional.size())) {
            String[] parts = spec.split(";");
            RemotingCommand request = RemotingCommand.createRequestCommand(Integer.parseInt(parts[0]), null);
            for (int i = 1; i < parts.length; i++) {
                int eq = parts[i].indexOf('=');
                String key = parts[i].substring(0, eq);
                String value = parts[i].substring(eq + 1);
                if (key.equals("body")) {
                    request.setBody(value.getBytes(StandardCharsets.UTF_8));
                } else {
                    request.addExtField(key, value);
                }
            }
            try {
                RemotingCommand response = client.invokeSync(addr, request, 10000);
                System.out.println("RESP code=" + response.getCode() + " remark=" + String.valueOf(response.getRemark()).replace('\n', ' '));
                if (response.getBody() != null) {
                    System.out.println("BODY " + new String(response.getBody(), StandardCharsets.UTF_8));
                }
            } catch (Exception e) {
                System.out.println("ERROR " + ClientOptions.oneLine(e));
            }
        }
        client.shutdown();
        System.exit(0);
    }
}
