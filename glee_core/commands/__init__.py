"""The command line's commands, a module a family (``glee_core.cli`` parses the flags, then
calls one): training and the data's reports in ``training``, what is done with stored runs in
``stored``. The top layer: they may import every package below."""
