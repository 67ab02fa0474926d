"""Programs with a type error and where it is: (text, line, column, message). The library
(``test_syntax``) and the command line (``test_faults``) must both name the place."""

TYPE_ERRORS = [
    ("X : [float]64\njoin $ X", 2, 1, "join expects an array of arrays, got [float]64"),
    ("X : [float]8\nY : [float]9\nmap(\\t -> get(0)(t)) $ zip(X, Y)", 3, 24,
     "zip of arrays of unequal lengths: 8 and 9"),
    ("X : [float]N\nmap(\\a b -> add(a, b)) $ X", 2, 5,
     "lambda takes 2 argument(s) but is given 1"),
    ("map(id) o join", 1, 1, "the program is a function, not an expression"),
]
