"""The Kubernetes backend (OSMO's "backend operator" role): dispatch, listener, cleanup, nodes.

``manage.py run_k8s_backend`` runs it as one leader-elected process (:mod:`.runner`).
"""
