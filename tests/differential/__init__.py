"""The differential suite: one script of remoting requests sent to the Java NameServer (the judge) and
to ours, and the field-by-field comparison of the answers (see ``docs/compatibility.md``)."""
