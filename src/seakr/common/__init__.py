"""The ground floor every other part stands on: reading and writing files, strict JSON, tables of records,
the console, the checks of user-given values, and the names of a run's record files. Imports nothing of seakr."""
