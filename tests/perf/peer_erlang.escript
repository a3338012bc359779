#!/usr/bin/env escript
%% The Erlang/OTP peer of bench_supervision.py (run with `escript`, never a phloem
%% dependency). Measures, as phloem's side does: a gen_server:call round trip (median
%% of ASKS), restart after a crash under a one_for_one supervisor (a cast that crashes
%% the child -> the restarted child's init has run, median of RESTARTS), and the memory
%% of one idle supervised gen_server (IDLE of them under simple_one_for_one). The restart
%% is measured with its crash reports written (to /dev/null, as phloem writes its crash
%% line) and again with the logger off. Prints one JSON line.
-mode(compile).
-export([init/1, handle_call/3, handle_cast/2, start_worker/1]).

-define(ASKS, 20000).
-define(RESTARTS, 200).
-define(IDLE, 10000).

main(_) ->
    process_flag(trap_exit, true),
    logger:remove_handler(default),
    ok = logger:add_handler(null, logger_std_h, #{config => #{file => "/dev/null"}}),
    Logged = restart_us(),
    logger:set_primary_config(level, none),  % the crashes are on purpose
    Ask = ask_us(),
    Restart = restart_us(),
    Idle = idle_kib(),
    io:format("{\"ask_us\": ~.3f, \"restart_us\": ~.3f, \"restart_logged_us\": ~.3f, "
              "\"idle_kib\": ~.3f, \"otp\": \"~s\"}~n",
              [Ask, Restart, Logged, Idle, erlang:system_info(otp_release)]).

%% -- callbacks: one module, the supervisor's and the worker's init told apart by args --
init({sup, Flags, Specs}) -> {ok, {Flags, Specs}};
init({worker, Notify}) ->
    case Notify of
        none -> ok;
        Pid -> Pid ! started
    end,
    {ok, Notify}.
handle_call(Msg, _From, State) -> {reply, Msg, State}.
handle_cast(crash, _State) -> erlang:error(crash);
handle_cast(_, State) -> {noreply, State}.

start_worker(Notify) -> gen_server:start_link(?MODULE, {worker, Notify}, []).

median(Samples) -> lists:nth(length(Samples) div 2 + 1, lists:sort(Samples)).

time_us(F) ->
    T0 = erlang:monotonic_time(nanosecond),
    F(),
    (erlang:monotonic_time(nanosecond) - T0) / 1000.

ask_us() ->
    {ok, Pid} = start_worker(none),
    [gen_server:call(Pid, x) || _ <- lists:seq(1, 1000)],
    median([time_us(fun() -> gen_server:call(Pid, x) end) || _ <- lists:seq(1, ?ASKS)]).

restart_us() ->
    Me = self(),
    Spec = #{id => echo, start => {?MODULE, start_worker, [Me]}, restart => permanent},
    Flags = #{strategy => one_for_one, intensity => 100000, period => 1},
    {ok, Sup} = supervisor:start_link(?MODULE, {sup, Flags, [Spec]}),
    receive started -> ok end,
    Samples = [restart_once(Sup) || _ <- lists:seq(1, ?RESTARTS)],
    unlink(Sup),
    exit(Sup, shutdown),
    median(Samples).

restart_once(Sup) ->
    [{echo, Pid, _, _}] = supervisor:which_children(Sup),
    T0 = erlang:monotonic_time(nanosecond),
    gen_server:cast(Pid, crash),
    receive started -> ok end,
    (erlang:monotonic_time(nanosecond) - T0) / 1000.

idle_kib() ->
    Spec = #{id => idle, start => {?MODULE, start_worker, []}, restart => permanent},
    Flags = #{strategy => simple_one_for_one, intensity => 1, period => 1},
    {ok, Sup} = supervisor:start_link(?MODULE, {sup, Flags, [Spec]}),
    erlang:garbage_collect(),
    Before = erlang:memory(total),
    [{ok, _} = supervisor:start_child(Sup, [none]) || _ <- lists:seq(1, ?IDLE)],
    [erlang:garbage_collect(P) || P <- processes()],
    After = erlang:memory(total),
    unlink(Sup),
    exit(Sup, shutdown),
    (After - Before) / ?IDLE / 1024.
