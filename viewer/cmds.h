/* cmds.h: the coprof command's subcommands, one file each (cmd-NAME.c).
 * Each takes the arguments after its name (argv[0] is the subcommand) and returns
 * the process exit status: 0 ok, 1 a finding (diff), 2 bad usage or bad input. */
#ifndef VW_CMDS_H
#define VW_CMDS_H

int vw_cmd_record(int argc, char **argv);
int vw_cmd_toggle(int argc, char **argv);
int vw_cmd_attach(int argc, char **argv);
int vw_cmd_detach(int argc, char **argv);
int vw_cmd_view(int argc, char **argv);
int vw_cmd_report(int argc, char **argv);
int vw_cmd_export(int argc, char **argv);
int vw_cmd_diff(int argc, char **argv);

#endif
