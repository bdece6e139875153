"""`make scale` (`dra-conformance scale`): the scalability benchmark of issue 39. Figures, not verdicts: per point
(N kwok nodes) the KEP's stress shape with and without binding conditions, the components' own latency histograms,
the run-wide rules judged over the whole stress, and what every process (the suite's own included) cost."""
