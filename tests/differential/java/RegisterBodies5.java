// REGISTER_BROKER bodies written by RocketMQ 5.x's own RegisterBrokerBody.encode (run with the 5.5.0 jars).
// stdin: a JSON array of body specs (see tests/differential/java_bodies.py); stdout: one JSON object
// {"version": MQVersion.CURRENT_VERSION, "bodies": [base64, ...]}.
import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.remoting.protocol.DataVersion;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.remoting.protocol.body.RegisterBrokerBody;
import org.apache.rocketmq.remoting.protocol.body.TopicConfigAndMappingSerializeWrapper;

public class RegisterBodies5 {
    public static void main(String[] args) throws Exception {
        JSONArray specs = JSON.parseArray(new String(System.in.readAllBytes(), StandardCharsets.UTF_8));
        List<String> bodies = new ArrayList<>();
        for (int i = 0; i < specs.size(); i++) {
            JSONObject spec = specs.getJSONObject(i);
            DataVersion dataVersion = new DataVersion();
            dataVersion.setCounter(new AtomicLong(spec.getLongValue("counter")));
            dataVersion.setTimestamp(spec.getLongValue("timestamp"));
            dataVersion.setStateVersion(spec.getLongValue("stateVersion"));
            ConcurrentHashMap<String, TopicConfig> table = new ConcurrentHashMap<>();
            JSONArray topics = spec.getJSONArray("topics");
            for (int t = 0; t < topics.size(); t++) {
                JSONObject topic = topics.getJSONObject(t);
                TopicConfig config = new TopicConfig(topic.getString("name"), topic.getIntValue("read"),
                    topic.getIntValue("write"), topic.getIntValue("perm"));
                config.setTopicSysFlag(topic.getIntValue("sysFlag"));
                config.setOrder(topic.getBooleanValue("order"));
                JSONObject attributes = topic.getJSONObject("attributes");
                if (attributes != null) {
                    for (String key : attributes.keySet()) {
                        config.getAttributes().put(key, attributes.getString(key));
                    }
                }
                table.put(config.getTopicName(), config);
            }
            TopicConfigAndMappingSerializeWrapper wrapper = new TopicConfigAndMappingSerializeWrapper();
            wrapper.setDataVersion(dataVersion);
            wrapper.setTopicConfigTable(table);
            RegisterBrokerBody body = new RegisterBrokerBody();
            body.setTopicConfigSerializeWrapper(wrapper);
            body.setFilterServerList(spec.getJSONArray("filterServers").toJavaList(String.class));
            bodies.add(Base64.getEncoder().encodeToString(body.encode(spec.getBooleanValue("compressed"))));
        }
        JSONObject out = new JSONObject();
        out.put("version", MQVersion.CURRENT_VERSION);
        out.put("bodies", bodies);
        System.out.println(out.toJSONString());
    }
}
