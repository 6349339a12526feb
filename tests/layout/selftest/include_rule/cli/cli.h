int cli;
