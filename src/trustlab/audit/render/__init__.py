"""Renderers of the audit's sections: a section's result (figures, checks, notes) -> HTML.

Each built-in section's ``render(result)`` calls its module here, which reads the result
alone (the report never recomputes) and draws with matplotlib through
:mod:`trustlab.audit.plots`. Computing a report imports none of these modules, so it needs
no plotting library; rendering it does.
"""
