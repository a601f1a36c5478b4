import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Many mqadmin commands in one JVM (one JVM each costs seconds): reads one command per stdin line, its
 * arguments separated by tabs, runs it through MQAdminStartup.main0 exactly as bin/mqadmin does, and
 * prints "@@END" after its output. stderr is merged into stdout so a command's stack trace stays with it.
 */
public class MqadminBatch {
    public static void main(String[] args) throws Exception {
        System.setErr(System.out);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            try {
                MQAdminStartup.main0(line.split("\t"), null);
            } catch (Throwable e) {
                e.printStackTrace(System.out);
            }
            System.out.flush();
            System.out.println("@@END");
            System.out.flush();
        }
        System.exit(0);
    }
}
