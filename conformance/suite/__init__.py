"""The scenarios: suite/cluster certifies kube-apiserver and kube-scheduler with suite-owned drivers;
suite/implementation certifies an implementation through its profile.
"""
