"""The embedded cluster: nodes and their pods in the database, placed by our own scheduling
loop — one leader (:mod:`.loop`) running a cycle (:mod:`.cycle`, snapshot from rows in
:mod:`.snapshot`) per embedded backend, the simulated tasks' output (:mod:`.sim_logs`) and the
demo data of ``osmo standalone`` (:mod:`.demo`)."""
