// slf4j 1.7's binding for KafkaTool (tests/kafka/java/KafkaTool.java): the Java client's log
// lines at -Dkafkatool.log=LEVEL (trace, debug, info, warn: the default, error, off) and above
// to stderr, so a failing test shows what the client saw. (slf4j-api alone logs nothing.)
package org.slf4j.impl;

import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.ILoggerFactory;
import org.slf4j.Logger;
import org.slf4j.helpers.FormattingTuple;
import org.slf4j.helpers.MarkerIgnoringBase;
import org.slf4j.helpers.MessageFormatter;
import org.slf4j.spi.LoggerFactoryBinder;

public class StaticLoggerBinder implements LoggerFactoryBinder {
    public static String REQUESTED_API_VERSION = "1.6.99";
    private static final StaticLoggerBinder SINGLETON = new StaticLoggerBinder();
    private final ILoggerFactory factory = new Factory();

    public static StaticLoggerBinder getSingleton() { return SINGLETON; }
    public ILoggerFactory getLoggerFactory() { return factory; }
    public String getLoggerFactoryClassStr() { return Factory.class.getName(); }

    static final class Factory implements ILoggerFactory {
        private final ConcurrentHashMap<String, Logger> loggers = new ConcurrentHashMap<>();
        public Logger getLogger(String name) { return loggers.computeIfAbsent(name, StderrLogger::new); }
    }
}

final class StderrLogger extends MarkerIgnoringBase {
    static final String[] NAMES = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"};
    static final int LEVEL = level(System.getProperty("kafkatool.log", "warn"));

    StderrLogger(String name) { this.name = name; }

    static int level(String s) {
        for (int i = 0; i < NAMES.length; i++) if (NAMES[i].equalsIgnoreCase(s)) return i;
        return 5;  // off
    }

    void log(int level, String format, Object[] args) {
        if (level < LEVEL) return;
        FormattingTuple t = args == null ? null : MessageFormatter.arrayFormat(format, args);
        String msg = t == null ? format : t.getMessage();
        Throwable th = t == null ? null : t.getThrowable();
        System.err.println("[" + NAMES[level] + "] " + name.substring(name.lastIndexOf('.') + 1) + ": " + msg
                + (th == null ? "" : " (" + th + ")"));
    }

    public boolean isTraceEnabled() { return 0 >= LEVEL; }
    public void trace(String m) { log(0, m, null); }
    public void trace(String f, Object a) { if (0 >= LEVEL) log(0, f, new Object[]{a}); }
    public void trace(String f, Object a, Object b) { if (0 >= LEVEL) log(0, f, new Object[]{a, b}); }
    public void trace(String f, Object... a) { if (0 >= LEVEL) log(0, f, a); }
    public void trace(String m, Throwable t) { if (0 >= LEVEL) log(0, m, new Object[]{t}); }
    public boolean isDebugEnabled() { return 1 >= LEVEL; }
    public void debug(String m) { log(1, m, null); }
    public void debug(String f, Object a) { if (1 >= LEVEL) log(1, f, new Object[]{a}); }
    public void debug(String f, Object a, Object b) { if (1 >= LEVEL) log(1, f, new Object[]{a, b}); }
    public void debug(String f, Object... a) { if (1 >= LEVEL) log(1, f, a); }
    public void debug(String m, Throwable t) { if (1 >= LEVEL) log(1, m, new Object[]{t}); }
    public boolean isInfoEnabled() { return 2 >= LEVEL; }
    public void info(String m) { log(2, m, null); }
    public void info(String f, Object a) { if (2 >= LEVEL) log(2, f, new Object[]{a}); }
    public void info(String f, Object a, Object b) { if (2 >= LEVEL) log(2, f, new Object[]{a, b}); }
    public void info(String f, Object... a) { if (2 >= LEVEL) log(2, f, a); }
    public void info(String m, Throwable t) { if (2 >= LEVEL) log(2, m, new Object[]{t}); }
    public boolean isWarnEnabled() { return 3 >= LEVEL; }
    public void warn(String m) { log(3, m, null); }
    public void warn(String f, Object a) { if (3 >= LEVEL) log(3, f, new Object[]{a}); }
    public void warn(String f, Object a, Object b) { if (3 >= LEVEL) log(3, f, new Object[]{a, b}); }
    public void warn(String f, Object... a) { if (3 >= LEVEL) log(3, f, a); }
    public void warn(String m, Throwable t) { if (3 >= LEVEL) log(3, m, new Object[]{t}); }
    public boolean isErrorEnabled() { return 4 >= LEVEL; }
    public void error(String m) { log(4, m, null); }
    public void error(String f, Object a) { if (4 >= LEVEL) log(4, f, new Object[]{a}); }
    public void error(String f, Object a, Object b) { if (4 >= LEVEL) log(4, f, new Object[]{a, b}); }
    public void error(String f, Object... a) { if (4 >= LEVEL) log(4, f, a); }
    public void error(String m, Throwable t) { if (4 >= LEVEL) log(4, m, new Object[]{t}); }
}
