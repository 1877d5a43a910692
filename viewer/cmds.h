/* cmds.h: the coprof command's subcommands, one file each (cmd-NAME.c).
 * Each takes the arguments after its name (argv[0] is the subcommand) and returns
 * the process exit status: 0 ok, 1 a finding (diff), 2 bad usage or bad input. */
#ifndef VW_CMDS_H
#define VW_CMDS_H

int vw_cmd_record(int argc, char **argv);
int vw_cmd_toggle(int argc, char **argv);
int vw_cmd_view(int argc, char **argv);
int vw_cmd_report(int argc, char **argv);
int vw_cmd_export(int argc, char **argv);
int vw_cmd_diff(int argc, char **argv);

/* A signal coprof can toggle with ("USR2", "SIGUSR1", "RTMIN+2", "12"); -1 if not.
 * In cmd-toggle.c; cmd-record.c checks --signal with it. */
int vw_parse_signal(const char *s);

#endif
